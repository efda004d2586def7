/* tests/calib_known.h: a reference calibration loaded for the bases this build has. A §9 file
 * (kv-calib9-*) holds fits of every §9 base; while one is missing from the codec table, its fits
 * are left out (and named on a line that is neither PASS nor FAIL) instead of the whole file being
 * refused, so the rows of the other bases still run. */
#ifndef KVQ_TEST_CALIB_KNOWN_H
#define KVQ_TEST_CALIB_KNOWN_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model/formats/calibration.h"

/* calibration_from_safetensors on st without the fits whose base this build lacks (each named on
 * a line): a §9 file stays usable for the bases that are here. */
static inline int load_known_fits(const char *path, const CalibModel *geometry, Calibration *c, Error *err) {
    SafeTensors st, view;
    if (st_open(&st, path, err)) return -1;
    view = st;
    view.tensors = malloc((size_t)st.n_tensors * sizeof *view.tensors);
    view.n_tensors = 0;
    char left_out[512] = "";
    for (int i = 0; i < st.n_tensors && view.tensors; i++) {
        const char *name = st.tensors[i].name;
        char base[64], why[160];
        KvBase b;
        snprintf(base, sizeof base, "%s", strncmp(name, "fit.", 4) ? "fp32" : name + 4);
        base[strcspn(base, "+.")] = '\0';
        if (kv_base_parse(base, &b, why, sizeof why) == 0) view.tensors[view.n_tensors++] = st.tensors[i];
        else if (!strstr(left_out, base) && strlen(left_out) + strlen(base) + 2 < sizeof left_out)
            strcat(strcat(left_out, " "), base);
    }
    if (left_out[0]) printf("%s: fits of bases not in this build left out:%s\n", path, left_out);
    int rc = view.tensors ? calibration_from_safetensors(&view, geometry, c, err) : error_set(err, "out of memory");
    free(view.tensors);
    st_close(&st);
    return rc;
}

#endif
