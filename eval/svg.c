/* eval/svg.c: text and colours shared by kvq's SVG charts. */
#include "eval/svg.h"
#include <math.h>
#include <string.h>

/* Bytes in the UTF-8 sequence at s (1-4), or 0 when it is not a valid one. */
static int utf8_len(const unsigned char *s) {
    unsigned char c = s[0];
    int len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (len < 2) return len;
    unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (s[1] < lo || s[1] > hi) return 0;
    for (int i = 2; i < len; i++)    /* stops at the NUL, which is no continuation byte */
        if ((s[i] & 0xC0) != 0x80) return 0;
    return len;
}

void svg_text_n(FILE *f, const char *s, size_t n) {
    static const char special[] = "&<>\"'", *const entity[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    const unsigned char *u = (const unsigned char *)s, *end = u + (s ? n : 0);
    while (u < end && *u) {
        int len = utf8_len(u);
        const char *hit = strchr(special, *u);
        if (len > end - u) len = 0;    /* a sequence cut by the end of the n bytes */
        if (hit) fputs(entity[hit - special], f);
        else if (len == 0 || *u < 0x20 || *u == 0x7f) fputc('?', f);
        else fwrite(u, 1, (size_t)len, f);
        u += len ? len : 1;
    }
}

void svg_text(FILE *f, const char *s) { svg_text_n(f, s, s ? strlen(s) : 0); }

void svg_ramp(double t, int rgb[3]) {
    static const int stops[4][3] = {{24, 18, 84}, {33, 120, 142}, {94, 201, 98}, {253, 231, 37}};
    double x = (t < 0 ? 0 : t > 1 ? 1 : t) * 3;
    int i = x >= 3 ? 2 : (int)x;
    double u = x - i;
    for (int k = 0; k < 3; k++) rgb[k] = (int)lround(stops[i][k] + u * (stops[i + 1][k] - stops[i][k]));
}
