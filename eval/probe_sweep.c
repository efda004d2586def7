/* eval/probe_sweep.c: the probes on a sweep's configurations (see probe_sweep.h): a SweepDriver
 * whose finish writes the sweep's outputs and then runs each probe task. */
#include "eval/probe_sweep.h"
#include "eval/calibration.h"
#include "model/formats/fileio.h"
#include "model/modeldir.h"
#include <stdlib.h>
#include <string.h>

int probe_sweep_add(ProbeSweep *p, const char *task, Error *err) {
    int t = probe_task_parse(task);
    if (t < 0) return error_set(err, "--probe must be copy, passkey or diverge, got '%.100s'", task);
    for (int i = 0; i < p->n_tasks; i++)
        if (p->tasks[i] == (ProbeTask)t) return error_set(err, "--probe %s given twice", task);
    p->tasks[p->n_tasks++] = (ProbeTask)t;
    return 0;
}

/* out_dir/probe-TASK.EXT, one of md, csv, json. */
static int write_file(const char *out_dir, const ProbeResult *r, const char *model, const char *const *labels,
                      const char *ext, Error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/probe-%s.%s", out_dir, probe_task_name(r->o.task), ext);
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    if (!strcmp(ext, "md")) probe_report_text(af.f, r, model, labels);
    else if (!strcmp(ext, "csv")) probe_report_csv(af.f, r, labels);
    else probe_report_json(af.f, r, model, labels);
    return atomic_commit(&af, err);
}

typedef struct {
    const ProbeSweep *p;
} Finish;

/* The configurations' schemes and labels ("fp32" first), then each task run and written. */
static int run_probes(FILE *out, const char *out_dir, const SweepSettings *s, const ProbeSweep *p, int json,
                      const Model *m, const Tokenizer *tok, Error *err) {
    int n = s->n_configs, rc = 0;
    const KvCacheScheme **schemes = malloc((size_t)n * sizeof *schemes);
    char (*names)[1100] = malloc((size_t)n * sizeof *names);
    const char **labels = malloc((size_t)(n + 1) * sizeof *labels);
    if (!schemes || !names || !labels) rc = error_set(err, "out of memory");
    for (int i = 0; i < n && !rc; i++) {
        const SweepConfig *c = &s->configs[i];
        schemes[i] = &c->scheme;   /* with the sweep's calibration, held while the sweep finishes */
        if (!strcmp(c->k_text, c->v_text)) snprintf(names[i], sizeof names[i], "%s", c->k_text);
        else snprintf(names[i], sizeof names[i], "K %s / V %s", c->k_text, c->v_text);
        labels[i + 1] = names[i];
    }
    if (!rc) labels[0] = "fp32";
    for (int t = 0; t < p->n_tasks && !rc; t++) {
        ProbeOptions o = p->o;
        o.task = p->tasks[t];
        o.ctx = s->ppl.ctx;
        ProbeResult r;
        rc = probe_run(m, tok, &o, schemes, n, &r, err);
        static const char *const exts[] = {"md", "csv", "json"};
        for (int e = 0; e < 3 && !rc; e++) rc = write_file(out_dir, &r, s->model, labels, exts[e], err);
        if (!rc && !json) {
            fprintf(out, "\n");
            probe_report_text(out, &r, s->model, labels);
            fprintf(out, "\nwrote %s/probe-%s.md, .csv, .json\n", out_dir, probe_task_name(o.task));
        }
        if (!rc) probe_result_free(&r);
    }
    free(schemes);
    free(names);
    free(labels);
    return rc;
}

static int finish_with_probes(FILE *out, const char *out_dir, const SweepSettings *s, const SweepTotals *t, int json,
                              void *user, Error *err) {
    const ProbeSweep *p = ((const Finish *)user)->p;
    if (sweep_finish(out, out_dir, s, t, json, err)) return -1;
    ModelDir L;
    if (modeldir_load(&L, s->model, 1, err)) return -1;
    L.model.precision = strcmp(s->precision, "bf16") ? MATMUL_EXACT : MATMUL_BF16_ACT;   /* as the sweep ran */
    int rc = run_probes(out, out_dir, s, p, json, &L.model, L.tok, err);
    modeldir_free(&L);
    return rc;
}

int probe_sweep_run_and_report(SweepSettings *s, const ProbeSweep *p, const SweepRun *run, Error *err) {
    Finish f = {p};
    SweepDriver d = {"sweep", NULL, finish_with_probes, &f};
    return sweep_run_and_report_as(&d, s, run, err);
}
