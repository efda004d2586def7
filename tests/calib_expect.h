/* tests/calib_expect.h: what the calibration file tests (tests/test_calibration.c,
 * tests/test_calibration_reference.c) expect of a refused load: rc -1, one line naming the file
 * and the problem, nothing left allocated (a zeroed Calibration; the SANITIZE=1 build's
 * LeakSanitizer checks the rest). And the sha256s of the reference model and text. */
#ifndef KVQ_CALIB_EXPECT_H
#define KVQ_CALIB_EXPECT_H
#include <string.h>
#include "model/formats/calibration.h"
#include "tests/test.h"

#define OUTLIERS_SHA "36068468f272b799b51158bdcd14dab686b173603129268c69ac30d522c60034"
#define BROWN_SHA "7880843642107fca38d60a47f3fdcba4a3b84e6c7d16c7f56de7009d86bcdfbc"
#define TEXT_SHA "4cd0f6876d07a413aa911261ff6d363c72d757d47f0fdd6015702014c89cb9c7"

static inline int is_empty(const Calibration *c) {
    return !c->stats_k && !c->stats_kpre && !c->stats_v && !c->stats_q && !c->fits && c->n_fits == 0 && c->n_layers == 0;
}

static inline int one_line(const char *msg) { return msg[0] && !strchr(msg, '\n'); }

static inline void expect_refused(const char *path, const CalibModel *model, const char *want, const char *name) {
    Calibration c;
    Error err = {{0}};
    int rc = calibration_load(path, model, &c, &err);
    check(rc == -1 && strstr(err.msg, path) && strstr(err.msg, want) && one_line(err.msg) && is_empty(&c), name,
          "rc %d, message '%s' (want '%s')", rc, err.msg, want);
    if (rc == 0) calibration_free(&c);
}

#endif
