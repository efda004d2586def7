/* tests/test_standard_errors.c: the sums behind damage by position (eval/position.c) and the
 * per-layer error (eval/layer_error.c), against figures worked out by hand:
 * - a mean's standard error is the sample standard deviation (n - 1 in its variance) over sqrt(n):
 *   values {1, 3} give 1, not the 0.71 of dividing by n; {2, 6} give 2;
 * - merging layer-error sums adds their positions (rows) as it adds their sums: two parts of 2
 *   positions are 4, mean 0.4 and standard error 0.129 for {0.1, 0.3} + {0.5, 0.7}; merged in
 *   four parts (a 4-window sweep) the same. */
#include <math.h>
#include "eval/layer_error.h"
#include "eval/position.h"
#include "tests/test.h"

static void test_position_se(void) {
    PositionSums s = {0};
    position_sums_add(&s, 5, 1.0, 2.0, 1, 4.0);
    position_sums_add(&s, 9, 3.0, 6.0, 0, 4.0);
    PositionFigures f = position_figures(&s, position_bucket(5));
    check(f.n == 2 && fabs(f.kl_mean - 2) < 1e-15 && fabs(f.kl_se - 1) < 1e-12,
          "position: KL standard error of {1, 3} is 1 (sample variance, n - 1)", "n %ld, mean %g, se %.17g", f.n,
          f.kl_mean, f.kl_se);
    check(fabs(f.diff_mean - 4) < 1e-15 && fabs(f.diff_se - 2) < 1e-12,
          "position: NLL-change standard error of {2, 6} is 2 (sample variance, n - 1)", "mean %g, se %.17g",
          f.diff_mean, f.diff_se);
    check(fabs(f.top1 - 0.5) < 1e-15 && fabs(f.top1_se - 0.5 / sqrt(2)) < 1e-12,
          "position: top-1 agreement 1 of 2, its standard error sqrt(p(1-p)/n)", "%g +/- %g", f.top1, f.top1_se);
}

static LayerErrorSums part(double a, double b) {
    LayerErrorSums s = {.n_layers = 2, .rows = 2};
    layer_error_add(&s, 0, a);
    layer_error_add(&s, 0, b);
    layer_error_add(&s, 1, a / 10);
    layer_error_add(&s, 1, b / 10);
    return s;
}

static void test_layer_error(void) {
    LayerErrorSums one = part(1.0, 3.0);
    check(fabs(layer_error_se(&one, 0) - 1) < 1e-12, "layer error: standard error of {1, 3} is 1 (sample variance, n - 1)",
          "%.17g", layer_error_se(&one, 0));
    LayerErrorSums all = {0}, a = part(0.1, 0.3), b = part(0.5, 0.7);
    layer_error_merge(&all, &a);
    layer_error_merge(&all, &b);
    double se = sqrt((0.2 / 3) / 4);   /* deviations -0.3, -0.1, 0.1, 0.3: squares 0.2, over n - 1 = 3, then / n */
    check(all.rows == 4 && all.n_layers == 2 && fabs(layer_error_mean(&all, 0) - 0.4) < 1e-15 &&
              fabs(layer_error_se(&all, 0) - se) < 1e-12 && fabs(layer_error_mean(&all, 1) - 0.04) < 1e-15,
          "layer error: two parts of 2 positions merge into 4, mean 0.4, standard error 0.129",
          "rows %ld, mean %g, se %.17g (want %.17g)", all.rows, layer_error_mean(&all, 0), layer_error_se(&all, 0), se);
    LayerErrorSums four = {0};
    double v[4][2] = {{0.1, 0.3}, {0.5, 0.7}, {0.2, 0.2}, {0.6, 0.6}};
    for (int w = 0; w < 4; w++) {
        LayerErrorSums p = part(v[w][0], v[w][1]);
        layer_error_merge(&four, &p);
    }
    check(four.rows == 8 && fabs(layer_error_mean(&four, 0) - 0.4) < 1e-15,
          "layer error: four windows' parts merge into 8 positions, mean 0.4", "rows %ld, mean %g", four.rows,
          layer_error_mean(&four, 0));
    LayerErrorSums none = {0};
    layer_error_merge(&four, &none);
    check(four.rows == 8, "layer error: a part that measured nothing adds nothing", "rows %ld", four.rows);
}

int main(void) {
    test_position_se();
    test_layer_error();
    return test_exit_code();
}
