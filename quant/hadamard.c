/* quant/hadamard.c: the fast Walsh-Hadamard transform (see hadamard.h). */
#include <math.h>
#include "quant/hadamard.h"

int hadamard_size_ok(int n) { return n >= 1 && (n & (n - 1)) == 0; }

void hadamard(float *x, int n) {
    /* stage h combines elements h apart: after all stages x = H_n x in Sylvester's order */
    for (int h = 1; h < n; h *= 2)
        for (int i = 0; i < n; i += 2 * h)
            for (int j = i; j < i + h; j++) {
                float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
    float scale = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n; i++) x[i] *= scale;
}
