/* model/worksplit.c: contiguous runs per thread, with helping at the end (see worksplit.h). */
#include "model/worksplit.h"
#ifdef _OPENMP
#include <omp.h>
#endif

int work_split_threads(double work, double min_work) {
#ifdef _OPENMP
    int n = omp_get_max_threads();
    if (work < min_work || n < 1) return 1;
    return n < WORK_SPLIT_MAX_THREADS ? n : WORK_SPLIT_MAX_THREADS;
#else
    (void)work;
    (void)min_work;
    return 1;
#endif
}

int work_split_thread_index(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

void work_split_init(WorkSplit *w, int n_items, int n_runs, int chunk) {
    if (n_runs < 1) n_runs = 1;
    if (n_runs > WORK_SPLIT_MAX_THREADS) n_runs = WORK_SPLIT_MAX_THREADS;
    w->n_runs = n_runs;
    w->chunk = chunk < 1 ? 1 : chunk;
    for (int r = 0; r < n_runs; r++) {
        atomic_init(&w->run[r].next, (int)((long long)n_items * r / n_runs));
        w->run[r].end = (int)((long long)n_items * (r + 1) / n_runs);
    }
}

int work_split_next(WorkSplit *w, int thread, int *first, int *end) {
    /* own run first, then the others' in turn; a thread past n_runs (a larger team than
     * planned) only helps */
    for (int i = 0; i < w->n_runs; i++) {
        int r = (thread + i) % w->n_runs;
        if (atomic_load_explicit(&w->run[r].next, memory_order_relaxed) >= w->run[r].end) continue;
        int item = atomic_fetch_add_explicit(&w->run[r].next, w->chunk, memory_order_relaxed);
        if (item < w->run[r].end) {
            *first = item;
            *end = item + w->chunk < w->run[r].end ? item + w->chunk : w->run[r].end;
            return 1;
        }
    }
    return 0;
}
