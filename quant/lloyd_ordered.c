/* quant/lloyd_ordered.c: lloyd_fit for 1-D points in ascending order (pcaB's component tables,
 * lloyd.h's lloyd_fit_ordered), bit for bit: the points' sort order, passes that walk it or find
 * each centroid's cell by bisection of its bounds, the cells' float64 sums taken from exact integer
 * prefix sums or in any order where that is provably exact, else in point order; the rank
 * initialisation and the objective from the order. */
#include "quant/lloyd_internal.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- 1-D points in ascending order ----
 * With the centroids ascending (c_0 <= c_1 <= ...: what 1-D Lloyd from the rank initialisation
 * keeps), the nearest centroid to x under lloyd.h's float32 rule is found without the scan. Let p
 * be the first index with c_p >= x. For j < p, t_j = fl(x - c_j) > 0 does not grow with j (the
 * rounding is monotone), so neither does d_j = fl(t_j^2); for j >= p, |t_j| = fl(c_j - x) does
 * not shrink, so neither does d_j. The least distance is therefore d_{p-1} or d_p, and the lowest
 * index holding it is p when d_p < d_{p-1}, else the first of the run of distances equal to
 * d_{p-1} that ends at p - 1 (the left side does not grow, so equal ones are contiguous). */

static inline float distance_1d(float x, float c) {
    float t = x - c;
    return t * t;
}

/* The nearest of the ascending centroids to x (not NaN), p being the first index with c_p >= x. */
static int nearest_ascending(float x, const float *c, int k, int p) {
    if (p == 0) return 0;
    float left = distance_1d(x, c[p - 1]), right = p < k ? distance_1d(x, c[p]) : INFINITY;
    int j = p - 1;
    if (j > 0 && distance_1d(x, c[j - 1]) == left) /* rare: walk the run of equal distances */
        while (j > 0 && distance_1d(x, c[j - 1]) == left) j--;
    return right < left ? p : j;   /* a select, not a branch: the two sides are a coin toss */
}

/* One pass over the points in ascending order (values: their values in that order): each one's
 * code as lloyd_assign gives it, written in that order into sorted_codes, and the number that
 * differ from what sorted_codes held. The first centroid >= x only moves forward; equal points
 * (and -0, +0: the same distances) share a code. *monotone: the codes never go down along the
 * order (they can, when float32 rounding makes distinct entries equally near: nearest_ascending's
 * run of equal distances). */
static size_t walk_pass(const float *values, size_t n, const float *centroids, int k, uint16_t *sorted_codes,
                        int *monotone) {
    size_t changed = 0;
    int p = 0, code = 0, previous = 0, down = 0;
    float last = NAN;
    for (size_t s = 0; s < n; s++) {
        float x = values[s];
        if (!(x == last)) {
            while (p < k && centroids[p] < x) p++;
            code = nearest_ascending(x, centroids, k, p);
            last = x;
        }
        down |= code < previous;
        previous = code;
        changed += sorted_codes[s] != (uint16_t)code;
        sorted_codes[s] = (uint16_t)code;
    }
    *monotone = !down;
    return changed;
}

static void scatter_codes(const uint32_t *order, const uint16_t *sorted_codes, size_t n, uint16_t *codes) {
    for (size_t s = 0; s < n; s++) codes[order[s]] = sorted_codes[s];
}

/* The float64 sum of a cell's values v[0..count) (ascending) when every order of adding them
 * gives the same: all of one sign, each a multiple of u >= min|v| 2^-24 (u: the float32 ulp of
 * the smallest), and count max|v| < 2^29 min|v| <= 2^53 u, so that every partial sum is a multiple
 * of u below 2^53 u, exact in float64. Then four running sums give the point-order sum. Returns 0
 * (and leaves *sum) when the bound does not hold. */
static int exact_sum(const float *v, size_t count, double *sum) {
    float first = v[0], last = v[count - 1];
    if (!(first > 0 || last < 0)) return 0;
    double low = fmin(fabs(first), fabs(last)), high = fmax(fabs(first), fabs(last));
    if (!((double)count * high < 536870912.0 * low)) return 0;
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    size_t i = 0;
    for (; i + 4 <= count; i += 4) {
        a0 += v[i];
        a1 += v[i + 1];
        a2 += v[i + 2];
        a3 += v[i + 3];
    }
    for (; i < count; i++) a0 += v[i];
    *sum = (a0 + a1) + (a2 + a3);
    return 1;
}

static int lowest_bit(uint64_t w) {
#if defined(__GNUC__)
    return __builtin_ctzll(w);
#else
    int b = 0;
    while (!(w >> b & 1u)) b++;
    return b;
#endif
}

/* The float64 sum, in point order, of the points at positions lo..hi-1 of the order: their
 * indices marked in bits (all zero before and after), then read back ascending. */
static double sum_in_point_order(const float *points, const uint32_t *order, size_t lo, size_t hi, uint64_t *bits) {
    size_t first = SIZE_MAX, last = 0;
    for (size_t s = lo; s < hi; s++) {
        size_t w = order[s] / 64;
        bits[w] |= (uint64_t)1 << (order[s] % 64);
        first = w < first ? w : first;
        last = w > last ? w : last;
    }
    double sum = 0;
    for (size_t w = first; w <= last; w++) {
        uint64_t word = bits[w];
        bits[w] = 0;
        for (; word; word &= word - 1) sum += points[w * 64 + (size_t)lowest_bit(word)];
    }
    return sum;
}

/* lloyd_move_all (lloyd.c) for codes that never go down along the order: centroid c's points are
 * the run of positions holding c; it moves to their float64 sum in point order (exact_sum's, or
 * summed in point order) over their count, rounded once. A centroid with no points stays. */
static void move_ordered(const float *points, size_t n, const uint32_t *order, const float *values,
                         const uint16_t *sorted_codes, float *centroids, int k, uint64_t *bits) {
    size_t lo = 0;
    for (int c = 0; c < k && lo < n; c++) {
        size_t hi = lo;
        while (hi < n && sorted_codes[hi] == c) hi++;
        if (hi == lo) continue;
        double sum;
        if (!exact_sum(values + lo, hi - lo, &sum)) sum = sum_in_point_order(points, order, lo, hi, bits);
        centroids[c] = (float)(sum / (double)(hi - lo));
        lo = hi;
    }
}

size_t lloyd_order_scratch_bytes(size_t n) { return 3 * n * sizeof(uint32_t); }

/* A stable LSD radix sort of the points' order keys, a byte a pass: 4 passes between two pairs of
 * arrays (keys and indices), so the result ends in the first pair, in order. */
void lloyd_sort_order(const float *points, size_t n, uint32_t *order, void *scratch) {
    uint32_t *key = scratch, *other_key = key + n, *other_order = other_key + n;
    uint32_t *from_key = key, *from_order = order, *to_key = other_key, *to_order = other_order;
    for (size_t i = 0; i < n; i++) {
        key[i] = order_key(points[i]);
        order[i] = (uint32_t)i;
    }
    for (int shift = 0; shift < 32; shift += 8) {
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++) count[(from_key[i] >> shift & 0xffu) + 1]++;
        for (int b = 0; b < 256; b++) count[b + 1] += count[b];
        for (size_t i = 0; i < n; i++) {
            size_t at = count[from_key[i] >> shift & 0xffu]++;
            to_key[at] = from_key[i];
            to_order[at] = from_order[i];
        }
        uint32_t *t = from_key;
        from_key = to_key;
        to_key = t;
        t = from_order;
        from_order = to_order;
        to_order = t;
    }
}

/* From this many centroids the order pays: a pass by the cells' bounds beats the vectorized scan
 * even at 2 centroids (the walk alone, at 16,384 points, only from ~32). */
#define ORDERED_MIN_K 2

size_t lloyd_ordered_scratch_bytes(size_t n, int k) {
    return lloyd_scratch_bytes(1, k) + (n + 63) / 64 * sizeof(uint64_t) + (n + 1) * sizeof(int64_t) +
           2 * ((size_t)k + 1) * sizeof(size_t) + n * (sizeof(float) + sizeof(uint16_t));
}

/* ---- cells by their bounds ----
 * When the ascending centroids are also well apart (separated), the codes of the points in order
 * are the cells [bounds[c], bounds[c + 1]) of centroid c, each bound found by a bisection, and a
 * cell's float64 sum, when exact_sum's bound holds, is the difference of two exact integer prefix
 * sums: a pass costs O(k log n) instead of O(n). */

/* Well apart: finite, |x| and |c| at most D with 2^-40 <= D <= 2^60, and every gap between
 * neighbouring centroids at least 2^-16 D. Then for x > c_a > c_b the float32 differences x - c_a
 * and x - c_b (each within 2^-23 D of the true one) differ by more than 0.98 x 2^-16 D, and their
 * squares by far more than the 2^-24 relative rounding of each (nor do they overflow): two
 * distinct centroids on the same side of x never give equal distances, so nearest_ascending's run
 * of equal distances is never longer than one, its code is p - 1 or p, and the code does not go
 * down along the order. */
static int separated(const float *values, size_t n, const float *c, int k) {
    double d = fmax(fmax(fabs(values[0]), fabs(values[n - 1])), fmax(fabs(c[0]), fabs(c[k - 1])));
    if (!(d >= 0x1p-40 && d <= 0x1p60)) return 0;   /* also 0 on an infinity */
    double gap = 0x1p-16 * d;
    for (int j = 1; j < k; j++)
        if (!((double)c[j] - (double)c[j - 1] >= gap)) return 0;
    return 1;
}

/* Whether x's code is j or more (1 <= j < k), for separated centroids: above c_j it is; at or
 * below c_{j-1} it is not; in between (p = j) nearest_ascending picks j when c_j is strictly
 * nearer. Along ascending x this goes from false to true once. */
static inline int code_at_least(float x, const float *c, int j) {
    if (x > c[j]) return 1;
    if (!(x > c[j - 1])) return 0;
    return distance_1d(x, c[j]) < distance_1d(x, c[j - 1]);
}

/* The first position in [lo, hi] (hi: none in [lo, hi)) where code_at_least(., c, j) holds,
 * searched outward from `near` (the last pass's bound, which rarely moves far) in doubling steps,
 * then by bisection. */
static size_t find_bound(const float *values, size_t lo, size_t hi, const float *c, int j, size_t near) {
    size_t at = near < lo ? lo : near > hi ? hi : near;
    if (at < hi && code_at_least(values[at], c, j)) {   /* the bound is at or below `at` */
        size_t step = 1;
        hi = at;
        while (hi - lo > step && code_at_least(values[hi - step], c, j)) {
            hi -= step;
            step *= 2;
        }
        if (hi - lo > step) lo = hi - step + 1;
    } else if (at < hi) {   /* above `at` */
        size_t step = 1;
        lo = at + 1;
        while (hi - lo > step && !code_at_least(values[lo + step - 1], c, j)) {
            lo += step;
            step *= 2;
        }
        if (hi - lo > step) hi = lo + step - 1;
    }
    while (lo < hi) {   /* the answer is in [lo, hi] */
        size_t mid = lo + (hi - lo) / 2;
        if (code_at_least(values[mid], c, j)) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* bounds[c] = the first position of the order whose code is c or more (bounds[0] = 0, bounds[k]
 * = n), each at or after the one before; near: the last pass's bounds, or NULL. */
static void find_bounds(const float *values, size_t n, const float *c, int k, const size_t *near, size_t *bounds) {
    bounds[0] = 0;
    for (int j = 1; j < k; j++) bounds[j] = find_bound(values, bounds[j - 1], n, c, j, near ? near[j] : bounds[j - 1]);
    bounds[k] = n;
}

/* The integer prefix sums of the values in order at a resolution of 2^*exponent: prefix[s] =
 * the sum of trunc(v 2^-exponent) over positions < s, every |term| below 2^62 / (n + 1), so no
 * sum overflows. A value of magnitude 2^(exponent + 23) or more is a multiple of 2^exponent (its
 * float32 ulp is), so a cell of such values has its exact sum as a difference. 0 when the values
 * are not all finite or all zero (no prefix then). */
static int prefix_sums(const float *values, size_t n, int64_t *prefix, int *exponent) {
    double most = fmax(fabs(values[0]), fabs(values[n - 1]));
    if (!(most > 0 && most <= 0x1p127)) return 0;
    int top, headroom = 62;
    frexp(most, &top);   /* most < 2^top */
    for (size_t m = n + 1; m > 1; m = (m + 1) / 2) headroom--;   /* 62 - ceil(log2(n + 1)) */
    *exponent = top - headroom;
    double scale = ldexp(1.0, -*exponent);   /* a power of two: v * scale is exact */
    prefix[0] = 0;
    for (size_t s = 0; s < n; s++) prefix[s + 1] = prefix[s] + (int64_t)((double)values[s] * scale);
    return 1;
}

/* The least magnitude of the nonzero values in [lo, hi) (ascending), +inf when all are zero: at
 * one end of a cell of one sign, else on either side of its zeros. */
static float least_nonzero(const float *values, size_t lo, size_t hi) {
    float first = values[lo], last = values[hi - 1];
    if (first > 0) return first;
    if (last < 0) return -last;
    size_t a = lo, b = hi;   /* a: the first value >= 0 (-0 included) */
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (values[mid] < 0) a = mid + 1;
        else b = mid;
    }
    size_t z = a;   /* z: the first value > 0 */
    for (b = hi; z < b;) {
        size_t mid = z + (b - z) / 2;
        if (values[mid] > 0) b = mid;
        else z = mid + 1;
    }
    float least = INFINITY;
    if (a > lo) least = -values[a - 1];
    if (z < hi && values[z] < least) least = values[z];
    return least;
}

/* The ulp of float32 x != 0: what every float32 of magnitude >= |x| is a multiple of; 2^-149 for
 * a subnormal. Read from x's exponent field and built as a float64 power of two. */
static double ulp_of(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    int field = (int)(bits >> 23 & 0xffu);   /* |x| in [2^(field - 127), 2^(field - 126)) when field > 0 */
    uint64_t power = (uint64_t)((field > 0 ? field : 1) - 150 + 1023) << 52;
    double ulp;
    memcpy(&ulp, &power, sizeof ulp);
    return ulp;
}

/* move_ordered for cells given by their bounds. Every value of a cell is a multiple of u, the
 * ulp of its least nonzero magnitude; when count x max|v| < 2^53 u, every partial sum of the
 * point-order float64 sum is a multiple of u below 2^53 u, so that sum is exact, as it is under
 * exact_sum's bound. Such a cell takes its exact sum from the prefix sums when u is at least
 * their resolution, else from exact_sum; any other cell is summed in point order. The same means
 * as move_ordered. */
static void move_bounded(const float *points, const uint32_t *order, const float *values, const size_t *bounds,
                         const int64_t *prefix, int exponent, float *centroids, int k, uint64_t *bits) {
    double resolution = prefix ? ldexp(1.0, exponent) : INFINITY;
    for (int c = 0; c < k; c++) {
        size_t lo = bounds[c], hi = bounds[c + 1];
        if (hi == lo) continue;
        double sum, count = (double)(hi - lo);
        float first = values[lo], last = values[hi - 1], least = least_nonzero(values, lo, hi);
        double high = fmax(fabs(first), fabs(last));
        double u = isinf(least) ? INFINITY : ulp_of(least);   /* all zeros: any unit */
        int one_sign = first > 0 || last < 0;
        int any_order = one_sign && count * high < 536870912.0 * least;   /* exact_sum's bound */
        int exact = any_order || count * high < 0x1p53 * u;
        if (prefix && exact && u >= resolution)
            sum = (double)(prefix[hi] - prefix[lo]) * resolution;   /* a power of two: exact */
        else if (!any_order || !exact_sum(values + lo, hi - lo, &sum))
            sum = sum_in_point_order(points, order, lo, hi, bits);
        centroids[c] = (float)(sum / count);
    }
}

/* Whether the cells changed since the last pass (previous: its bounds), then previous = bounds. */
static int bounds_changed(size_t *previous, const size_t *bounds, int k) {
    int changed = memcmp(previous, bounds, ((size_t)k + 1) * sizeof *bounds) != 0;
    memcpy(previous, bounds, ((size_t)k + 1) * sizeof *bounds);
    return changed;
}

/* The codes in order that bounds describe, with how many differ from what sorted_codes held. */
static size_t codes_from_bounds(const size_t *bounds, int k, uint16_t *sorted_codes) {
    size_t changed = 0;
    for (int c = 0; c < k; c++)
        for (size_t s = bounds[c]; s < bounds[c + 1]; s++) {
            changed += sorted_codes[s] != (uint16_t)c;
            sorted_codes[s] = (uint16_t)c;
        }
    return changed;
}

/* Lloyd in the order's terms while the centroids stay ascending: by the cells' bounds while they
 * are also separated, else walk_pass, then move_ordered (or lloyd_move_all when the codes go down
 * somewhere); the scan from the first pass they are not ascending. sorted_codes holds the codes
 * of the last pass except while `stale` (the cells' bounds in `previous` hold them then). */
static LloydResult fit_ordered(const float *points, size_t n, const uint32_t *order, float *centroids, int k,
                               int max_iterations, uint16_t *codes, void *scratch) {
    char *base = scratch;
    size_t words = (n + 63) / 64;
    uint64_t *bits = (uint64_t *)(base + lloyd_scratch_bytes(1, k));
    int64_t *prefix = (int64_t *)(bits + words);
    size_t *bounds = (size_t *)(prefix + n + 1), *previous = bounds + k + 1;
    float *values = (float *)(previous + k + 1);
    uint16_t *sorted_codes = (uint16_t *)(values + n);
    memset(bits, 0, words * sizeof *bits);
    memset(sorted_codes, 0, n * sizeof *sorted_codes);
    for (size_t s = 0; s < n; s++) values[s] = points[order[s]];
    int exponent = 0, has_prefix = prefix_sums(values, n, prefix, &exponent), stale = 0;
    LloydResult r = {0, 0};
    int pass = 0;
    for (; pass < max_iterations && ascending(centroids, k); pass++) {
        int monotone = 1, by_bounds = separated(values, n, centroids, k);
        size_t changed;
        if (by_bounds) {
            find_bounds(values, n, centroids, k, stale ? previous : NULL, bounds);
            changed = stale ? (size_t)bounds_changed(previous, bounds, k) : codes_from_bounds(bounds, k, sorted_codes);
            if (!stale) memcpy(previous, bounds, ((size_t)k + 1) * sizeof *bounds);
            stale = 1;
        } else {
            if (stale) codes_from_bounds(previous, k, sorted_codes);
            stale = 0;
            changed = walk_pass(values, n, centroids, k, sorted_codes, &monotone);
        }
        r.iterations = pass + 1;
        if (pass > 0 && changed == 0) {
            r.converged = 1;
            break;
        }
        if (by_bounds) {
            move_bounded(points, order, values, bounds, has_prefix ? prefix : NULL, exponent, centroids, k, bits);
        } else if (monotone) {
            move_ordered(points, n, order, values, sorted_codes, centroids, k, bits);
        } else {
            scatter_codes(order, sorted_codes, n, codes);
            lloyd_move_all(points, n, 1, centroids, k, codes, scratch);
        }
    }
    if (stale) codes_from_bounds(previous, k, sorted_codes);
    scatter_codes(order, sorted_codes, n, codes);
    if (!r.converged && pass < max_iterations)
        lloyd_scan_passes(points, n, 1, centroids, k, pass, max_iterations, codes, scratch, &r);
    return r;
}

LloydResult lloyd_fit_ordered(const float *points, size_t n, const uint32_t *order, float *centroids, int k,
                              int max_iterations, uint16_t *codes, void *scratch) {
    int nan = 0;   /* a NaN point has no place in the order's walk: the scan then */
    for (size_t i = 0; i < n; i++) nan |= isnan(points[i]);
    if (nan || k < ORDERED_MIN_K || !ascending(centroids, k))
        return lloyd_fit(points, n, 1, centroids, k, max_iterations, codes, scratch);
    return fit_ordered(points, n, order, centroids, k, max_iterations, codes, scratch);
}

void lloyd_init_ranks_ordered(const float *points, size_t n, const uint32_t *order, int k, float *centroids) {
    for (int j = 0; j < k; j++) {
        size_t rank = (size_t)(((uint64_t)(2 * j + 1) * (uint64_t)n) / (2 * (uint64_t)k));
        centroids[j] = points[order[rank]];
    }
}

double lloyd_objective_ordered(const float *points, size_t n, const uint32_t *order, const float *centroids, int k,
                               double *distances) {
    int nan = 0;
    for (size_t i = 0; i < n; i++) nan |= isnan(points[i]);
    if (nan || !ascending(centroids, k)) return lloyd_objective(points, n, 1, centroids, k);
    /* objective_ascending's least distance of each point, the first centroid >= x found by a
     * walk along the order instead of a bisection, then summed in point order as there */
    int lo = 0;
    for (size_t s = 0; s < n; s++) {
        float x = points[order[s]];
        while (lo < k && centroids[lo] < x) lo++;
        double best = INFINITY;
        for (int j = lo - 1; j <= lo; j++)
            if (j >= 0 && j < k) {
                double u = (double)x - (double)centroids[j];
                if (u * u < best) best = u * u;
            }
        distances[order[s]] = best;
    }
    double total = 0;
    for (size_t i = 0; i < n; i++) total += distances[i];
    return total;
}

