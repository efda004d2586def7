/* quant/hadamard.h: the orthonormal Walsh-Hadamard rotation H = H_n / sqrt(n) of the scheme
 * language (+had, and inside tq): Sylvester's H_1 = [1], H_2m = [[H_m, H_m], [H_m, -H_m]].
 * H is symmetric and its own inverse, so the same call rotates and rotates back. */
#ifndef KVQ_HADAMARD_H
#define KVQ_HADAMARD_H

/* 1 when n is a power of two (n >= 1): the sizes H exists for. */
int hadamard_size_ok(int n);

/* x <- H x in place: the fast transform (n log2 n additions in butterflies, natural order),
 * then one multiplication by 1/sqrt(n). n must be a power of two. */
void hadamard(float *x, int n);

#endif
