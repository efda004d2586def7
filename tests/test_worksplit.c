/* tests/test_worksplit.c: model/worksplit hands out every item exactly once, in runs that
 * start where the split says, whatever the team size and chunk. */
#include "model/kernels/worksplit.h"
#include "tests/test.h"
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Every item claimed by some thread of a real parallel region of `team` threads (which may
 * differ from the n_runs the split was planned for); counts[i] = times item i was given. */
static void claim_all(WorkSplit *w, int team, int *counts) {
    (void)team;   /* unused without OpenMP */
    #pragma omp parallel num_threads(team)
    {
        long long a, b;
        while (work_split_next(w, work_split_thread_index(), &a, &b))
            for (long long i = a; i < b; i++) {
                #pragma omp atomic
                counts[i]++;
            }
    }
}

static void check_once(int n_items, int n_runs, int team, int chunk) {
    char name[96];
    snprintf(name, sizeof name, "worksplit: %d items, %d runs, team %d, chunk %d", n_items, n_runs, team, chunk);
    int *counts = calloc((size_t)n_items + 1, sizeof(int));
    WorkSplit w;
    work_split_init(&w, n_items, n_runs, chunk);
    claim_all(&w, team, counts);
    int bad = -1;
    for (int i = 0; i < n_items && bad < 0; i++)
        if (counts[i] != 1) bad = i;
    check(bad < 0, name, "item %d handed out %d times", bad, bad < 0 ? 0 : counts[bad]);
    free(counts);
}

/* Claims in a known order: thread t's first claim is the start of its own run, chunks shrink
 * to half of what is left near a run's end, and a thread whose run is empty goes on to the
 * front of the next run. */
static int claim_is(WorkSplit *w, int thread, int first, int end) {
    long long a = -1, b = -1;
    return work_split_next(w, thread, &a, &b) && a == first && b == end;
}

static void check_order(void) {
    WorkSplit w;
    work_split_init(&w, 20, 2, 3);   /* runs [0,10) and [10,20) */
    int ok = claim_is(&w, 1, 10, 13) && claim_is(&w, 0, 0, 3) && claim_is(&w, 1, 13, 16) &&
             claim_is(&w, 1, 16, 18) &&   /* 4 left: half */
             claim_is(&w, 1, 18, 19) && claim_is(&w, 1, 19, 20) &&
             claim_is(&w, 1, 3, 6) &&     /* run 1 empty: helps at run 0's front */
             claim_is(&w, 0, 6, 8) && claim_is(&w, 0, 8, 9) && claim_is(&w, 1, 9, 10);
    long long a, b;
    ok = ok && !work_split_next(&w, 0, &a, &b) && !work_split_next(&w, 1, &a, &b);
    check(ok, "worksplit: own run first, chunks halve near the end, then help at the other run's front",
          "claims out of order");
}

int main(void) {
    check_order();
    int sizes[] = {0, 1, 2, 7, 64, 176, 1001};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        check_once(sizes[i], 2, 2, 1);
        check_once(sizes[i], 2, 1, 1);     /* fewer threads than runs: one does both */
        check_once(sizes[i], 2, 4, 3);     /* more threads than runs: the extra ones only help */
        check_once(sizes[i], 3, 3, 4);
        check_once(sizes[i], 64, 8, 2);
    }
    /* counts past INT_MAX: the runs still start where the split says */
    WorkSplit big;
    work_split_init(&big, 3000000000LL, 2, 1000);
    long long a, b;
    int ok = work_split_next(&big, 1, &a, &b) && a == 1500000000LL && b == 1500001000LL &&
             work_split_next(&big, 0, &a, &b) && a == 0 && b == 1000;
    check(ok, "worksplit: item counts past INT_MAX", "run starts wrong");
    check(work_split_threads(1.0, 2.0) == 1, "worksplit: small work runs on one thread", "got %d",
          work_split_threads(1.0, 2.0));
    int nt = work_split_threads(4.0, 2.0);
    check(nt >= 1 && nt <= WORK_SPLIT_MAX_THREADS, "worksplit: thread count within 1..max", "got %d", nt);
    return test_exit_code();
}
