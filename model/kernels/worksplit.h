/* model/kernels/worksplit.h: n work items shared by the threads of a parallel region, each thread on
 * a contiguous run of its own, and a thread that is done early helping the others.
 *
 * Thread t owns items [t*n/nt, (t+1)*n/nt) and takes them from its front, `chunk` at a time,
 * or half of what is left once less than two chunks are; when its run is empty it takes from
 * the front of the other runs. If both cores ran at the same speed, a static split (each
 * thread its run, no helping) would be as good. On a shared machine one core is often slower
 * for a while (another tenant, an interrupt), and a static split then leaves the other idle
 * at the end of every matmul; the shrinking claims make the threads finish together.
 *
 * The result never depends on which thread computes an item, and every item is handed out
 * exactly once however many threads the region really has. */
#ifndef KVQ_WORKSPLIT_H
#define KVQ_WORKSPLIT_H

#include <stdatomic.h>

#define WORK_SPLIT_MAX_THREADS 64

/* Below this many multiply-adds a loop runs on one thread: waking threads costs more
 * than it saves on tiny models (model/kernels/README.md). Every parallel
 * loop of the forward pass uses it, in an OpenMP if() clause or as work_split_threads' min_work. */
#define PARALLEL_MIN_WORK (1 << 18)

typedef struct {
    struct {
        _Alignas(64) atomic_llong next;   /* the run's next unclaimed item; one cache line per run */
        long long end;
    } run[WORK_SPLIT_MAX_THREADS];
    int n_runs;
    long long chunk;
} WorkSplit;

/* Threads for a parallel region of this much work: OpenMP's maximum (capped at
 * WORK_SPLIT_MAX_THREADS) if work >= min_work, else 1; always 1 without OpenMP. */
int work_split_threads(double work, double min_work);

/* n_items in n_runs runs (n_runs >= 1, use work_split_threads), handed out chunk at a time
 * (fewer near a run's end). Counts are long long: a matmul's items are (row group, token
 * strip) pairs, whose product an int may not hold. */
void work_split_init(WorkSplit *w, long long n_items, int n_runs, long long chunk);

/* The next items for thread `thread`: [*first, *end). Returns 0 when none are left. */
int work_split_next(WorkSplit *w, int thread, long long *first, long long *end);

/* This thread's index in the current parallel region (0 outside one, or without OpenMP). */
int work_split_thread_index(void);

#endif
