/* model/kernels/worksplit.c: contiguous runs per thread, with helping at the end (see worksplit.h). */
#include "model/kernels/worksplit.h"
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

void work_split_init(WorkSplit *w, long long n_items, int n_runs, long long chunk) {
    if (n_runs < 1) n_runs = 1;
    if (n_runs > WORK_SPLIT_MAX_THREADS) n_runs = WORK_SPLIT_MAX_THREADS;
    w->n_runs = n_runs;
    w->chunk = chunk < 1 ? 1 : chunk;
    for (int r = 0; r < n_runs; r++) {
        /* n_items / n_runs first: n_items * r could overflow */
        atomic_init(&w->run[r].next, n_items / n_runs * r + n_items % n_runs * r / n_runs);
        w->run[r].end = n_items / n_runs * (r + 1) + n_items % n_runs * (r + 1) / n_runs;
    }
}

int work_split_next(WorkSplit *w, int thread, long long *first, long long *end) {
    /* own run first, then the others' in turn; a thread past n_runs (a larger team than
     * planned) only helps. Near a run's end a claim takes half of what is left (at least
     * one item), so the threads finish close together. */
    for (int i = 0; i < w->n_runs; i++) {
        int r = (thread + i) % w->n_runs;
        long long run_end = w->run[r].end, item = atomic_load_explicit(&w->run[r].next, memory_order_relaxed);
        while (item < run_end) {
            long long left = run_end - item, take = left / 2 >= w->chunk ? w->chunk : (left + 1) / 2;
            if (atomic_compare_exchange_weak_explicit(&w->run[r].next, &item, item + take, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                *first = item;
                *end = item + take;
                return 1;
            }
        }
    }
    return 0;
}
