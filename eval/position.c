/* eval/position.c: the position buckets' sums and figures (see position.h). */
#include "eval/position.h"
#include <math.h>
#include <string.h>

int position_bucket(int p) {
    int b = 0;
    for (long high = POS_FIRST_WIDTH; p >= high && b < POS_BUCKETS - 1; high *= 2) b++;
    return b;
}

int position_bucket_low(int b) { return b <= 0 ? 0 : POS_FIRST_WIDTH << (b - 1); }
int position_bucket_high(int b) { return POS_FIRST_WIDTH << b; }
int position_buckets_for(int ctx) { return ctx < 1 ? 0 : 1 + position_bucket(ctx - 1); }

void position_sums_add(PositionSums *s, int p, double kl, double diff, int agree, double base_nll) {
    int b = position_bucket(p);
    s->n[b]++;
    s->agree[b] += agree != 0;
    s->kl_sum[b] += kl;
    s->kl_sumsq[b] += kl * kl;
    s->diff_sum[b] += diff;
    s->diff_sumsq[b] += diff * diff;
    s->base_nll_sum[b] += base_nll;
}

void position_sums_merge(PositionSums *into, const PositionSums *from) {
    for (int b = 0; b < POS_BUCKETS; b++) {
        into->n[b] += from->n[b];
        into->agree[b] += from->agree[b];
        into->kl_sum[b] += from->kl_sum[b];
        into->kl_sumsq[b] += from->kl_sumsq[b];
        into->diff_sum[b] += from->diff_sum[b];
        into->diff_sumsq[b] += from->diff_sumsq[b];
        into->base_nll_sum[b] += from->base_nll_sum[b];
    }
}

long position_sums_count(const PositionSums *s) {
    long n = 0;
    for (int b = 0; b < POS_BUCKETS; b++) n += s->n[b];
    return n;
}

/* Standard error of the mean of n values from their sum and sum of squares. */
static double se_of_mean(double sum, double sumsq, long n) {
    if (n < 2) return NAN;
    double mean = sum / (double)n, var = (sumsq - (double)n * mean * mean) / (double)(n - 1);
    return sqrt((var > 0 ? var : 0) / (double)n);
}

PositionFigures position_figures(const PositionSums *s, int b) {
    PositionFigures f;
    long n = s->n[b];
    double dn = (double)n;
    f.n = n;
    f.kl_mean = n ? s->kl_sum[b] / dn : NAN;
    f.kl_se = se_of_mean(s->kl_sum[b], s->kl_sumsq[b], n);
    f.diff_mean = n ? s->diff_sum[b] / dn : NAN;
    f.diff_se = se_of_mean(s->diff_sum[b], s->diff_sumsq[b], n);
    f.top1 = n ? (double)s->agree[b] / dn : NAN;
    f.top1_se = n ? sqrt(f.top1 * (1 - f.top1) / dn) : NAN;
    f.base_nll_mean = n ? s->base_nll_sum[b] / dn : NAN;
    return f;
}

/* A double as JSON: 17 digits, or null (a sum that overflowed must not become "inf"). */
static void number(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.17g", v);
    else fputs("null", f);
}

void position_sums_write(FILE *f, const PositionSums *s) {
    fputc('[', f);
    int first = 1;
    for (int b = 0; b < POS_BUCKETS; b++) {
        if (!s->n[b]) continue;
        fprintf(f, "%s[%d, %ld, %ld", first ? "" : ", ", b, s->n[b], s->agree[b]);
        const double v[] = {s->kl_sum[b], s->kl_sumsq[b], s->diff_sum[b], s->diff_sumsq[b], s->base_nll_sum[b]};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
            fputs(", ", f);
            number(f, v[i]);
        }
        fputc(']', f);
        first = 0;
    }
    fputc(']', f);
}

#define MAX_BUCKET_TOKENS 1e12   /* far above any run's tokens; below 2^53, so counts stay exact */

/* A whole number in [0, MAX_BUCKET_TOKENS] from a JSON number item. */
static int count_item(const JsonValue *v, long *out) {
    if (v->type != JSON_NUMBER || !(v->number >= 0 && v->number <= MAX_BUCKET_TOKENS) || v->number != floor(v->number))
        return -1;
    *out = (long)v->number;
    return 0;
}

int position_sums_read(const JsonValue *a, PositionSums *s, const char *where, Error *err) {
    if (!a || a->type != JSON_ARRAY) return error_set(err, "%s: position sums are not an array", where);
    unsigned char seen[POS_BUCKETS] = {0};
    for (size_t i = 0; i < a->count; i++) {
        const JsonValue *e = &a->items[i];
        long b, n, agree;
        if (e->type != JSON_ARRAY || e->count != 8 || count_item(&e->items[0], &b) || b >= POS_BUCKETS || seen[b]++ ||
            count_item(&e->items[1], &n) || count_item(&e->items[2], &agree) || agree > n)
            return error_set(err, "%s: position bucket entry %zu is not [bucket, n, agree, 5 sums] (each bucket once)",
                             where, i);
        double v[5];
        for (int k = 0; k < 5; k++) {
            if (e->items[3 + k].type != JSON_NUMBER || !isfinite(e->items[3 + k].number))
                return error_set(err, "%s: position bucket entry %zu holds a sum that is not a number", where, i);
            v[k] = e->items[3 + k].number;
        }
        s->n[b] += n;
        s->agree[b] += agree;
        s->kl_sum[b] += v[0];
        s->kl_sumsq[b] += v[1];
        s->diff_sum[b] += v[2];
        s->diff_sumsq[b] += v[3];
        s->base_nll_sum[b] += v[4];
    }
    return 0;
}
