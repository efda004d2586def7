/* tests/svg_text_boxes.h: an SVG's texts measured as boxes with DejaVu Sans's own advance widths
 * (not eval/chart.c's estimate), and tests/test_chart.c's label-box checks of one chart: no text on
 * another, every text inside the viewBox, every number inside a panel frame and on no marker. A
 * file of its own so that test_chart.c stays under 700 lines and the measuring reads apart from
 * the charts it checks. */
#ifndef KVQ_SVG_TEXT_BOXES_H
#define KVQ_SVG_TEXT_BOXES_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"

/* Advance widths of DejaVu Sans (the sans-serif face librsvg uses on Debian), in 1/1000 em rounded
 * up, for ' ' .. '~', read from DejaVuSans.ttf and DejaVuSans-Bold.ttf's hmtx tables; any other
 * character counts 1 em. Taken here from the font, independently of eval/chart.c's estimate. */
static const short DEJAVU[95] = {
    318, 401, 460, 838, 637, 951, 780, 275, 391, 391, 500, 838, 318, 361, 318, 337,
    637, 637, 637, 637, 637, 637, 637, 637, 637, 637, 337, 337, 838, 838, 838, 531,
    1000, 685, 687, 699, 771, 632, 576, 775, 752, 295, 295, 656, 558, 863, 749, 788,
    604, 788, 695, 635, 611, 732, 685, 989, 686, 611, 686, 391, 337, 391, 838, 500,
    500, 613, 635, 550, 635, 616, 353, 635, 634, 278, 278, 580, 278, 975, 634, 612,
    635, 635, 412, 521, 393, 634, 592, 818, 592, 592, 525, 637, 337, 637, 838,
};
static const short DEJAVU_BOLD[95] = {
    349, 457, 521, 838, 696, 1002, 873, 307, 458, 458, 523, 838, 380, 416, 380, 366,
    696, 696, 696, 696, 696, 696, 696, 696, 696, 696, 400, 400, 838, 838, 838, 581,
    1000, 774, 763, 734, 831, 684, 684, 821, 837, 373, 373, 775, 638, 996, 837, 851,
    733, 851, 771, 721, 683, 813, 774, 1104, 771, 725, 726, 458, 366, 458, 838, 500,
    500, 675, 716, 593, 716, 679, 436, 716, 712, 343, 343, 666, 343, 1042, 712, 688,
    716, 716, 494, 596, 479, 712, 652, 924, 646, 652, 583, 712, 366, 712, 838,
};
#define FONT_ASCENT 0.929     /* the face's line box above and below the baseline, in em */
#define FONT_DESCENT 0.236

typedef struct { double x0, y0, x1, y1; char cls[8], text[48]; } TextBox;

/* The value of attribute name (" x=\"") inside the tag [tag, end), or def. */
static inline double attr(const char *tag, const char *end, const char *name, double def) {
    const char *s = strstr(tag, name);
    return s && s < end ? strtod(s + strlen(name), NULL) : def;
}

static inline int attr_is(const char *tag, const char *end, const char *name_value) {
    const char *s = strstr(tag, name_value);
    return s && s < end;
}

/* The width of XML character data (entities as their character) in em. */
static inline double xml_em(const char *s, const char *end, int bold) {
    double em = 0;
    for (; s < end; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '&') {
            const char *semi = memchr(s, ';', (size_t)(end - s));
            c = !strncmp(s, "&amp;", 5) ? '&' : !strncmp(s, "&lt;", 4) ? '<' : !strncmp(s, "&gt;", 4) ? '>'
              : !strncmp(s, "&quot;", 6) ? '"' : '\'';
            if (semi) s = semi;
        }
        if ((c & 0xC0) == 0x80) continue;
        em += c < 32 || c >= 127 ? 1.0 : (bold ? DEJAVU_BOLD[c - 32] : DEJAVU[c - 32]) / 1000.0;
    }
    return em;
}

/* Every <text> not rotated, as its box in the face above (font-size its own, else the root's 12). */
static inline int text_boxes(const char *svg, TextBox *out, int max) {
    int n = 0;
    for (const char *s = svg; (s = strstr(s, "<text ")) && n < max; s++) {
        const char *close = strchr(s, '>'), *stop = close ? strstr(close, "</text>") : NULL;
        if (!close || !stop) break;
        if (attr_is(s, close, "transform=")) continue;
        double x = attr(s, close, " x=\"", 0), y = attr(s, close, " y=\"", 0), fs = attr(s, close, " font-size=\"", 12);
        double w = xml_em(close + 1, stop, attr_is(s, close, "font-weight=\"bold\"")) * fs;
        double x0 = attr_is(s, close, "text-anchor=\"middle\"") ? x - w / 2 : attr_is(s, close, "text-anchor=\"end\"") ? x - w : x;
        TextBox *b = &out[n++];
        *b = (TextBox){x0, y - FONT_ASCENT * fs, x0 + w, y + FONT_DESCENT * fs, "", ""};
        const char *cls = strstr(s, "class=\"");
        if (cls && cls < close) snprintf(b->cls, sizeof b->cls, "%.*s", (int)strcspn(cls + 7, "\""), cls + 7);
        snprintf(b->text, sizeof b->text, "%.*s", (int)(stop - close - 1 < 47 ? stop - close - 1 : 47), close + 1);
    }
    return n;
}

static inline int boxes_meet(double ax0, double ay0, double ax1, double ay1, double bx0, double by0, double bx1, double by1) {
    return ax0 < bx1 && bx0 < ax1 && ay0 < by1 && by0 < ay1;
}

/* The label-box checks of one chart: no two texts overlap; every text inside the viewBox; every
 * number inside a panel frame and on no marker; want_numbers numbers in all (both panels). */
static inline void check_label_boxes(const char *what, const char *svg, int want_numbers) {
    enum { MAX_TEXTS = 2000 };
    TextBox *t = calloc(MAX_TEXTS, sizeof *t);
    char name[200], why[300] = "";
    if (!t || !svg) { free(t); return; }
    int n = text_boxes(svg, t, MAX_TEXTS), clash = 0, outside = 0, off_frame = 0, on_marker = 0, numbers = 0;
    double w = 0, h = 0, fx[2][4] = {{0}};
    const char *vb = strstr(svg, "viewBox=\"");
    if (vb) sscanf(vb, "viewBox=\"0 0 %lf %lf\"", &w, &h);
    int frames = 0;
    for (const char *s = svg; frames < 2 && (s = strstr(s, "<rect x=\""));) {
        int end = -1;
        s += 6;
        sscanf(s, "x=\"%lf\" y=\"%lf\" width=\"%lf\" height=\"%lf\" fill=\"none\"%n", &fx[frames][0], &fx[frames][1],
               &fx[frames][2], &fx[frames][3], &end);
        frames += end > 0;
    }
    for (int i = 0; i < n; i++) {
        const TextBox *a = &t[i];
        for (int j = i + 1; j < n; j++)
            if (boxes_meet(a->x0, a->y0, a->x1, a->y1, t[j].x0, t[j].y0, t[j].x1, t[j].y1) && !clash++)
                snprintf(why, sizeof why, "'%s' (%.1f,%.1f)-(%.1f,%.1f) on '%s' (%.1f,%.1f)-(%.1f,%.1f)", a->text, a->x0,
                         a->y0, a->x1, a->y1, t[j].text, t[j].x0, t[j].y0, t[j].x1, t[j].y1);
        if (!(a->x0 >= 0 && a->y0 >= 0 && a->x1 <= w && a->y1 <= h)) outside++;
        if (strcmp(a->cls, "num")) continue;
        numbers++;
        int in = 0;
        for (int k = 0; k < frames; k++)
            in |= a->x0 >= fx[k][0] && a->x1 <= fx[k][0] + fx[k][2] && a->y0 >= fx[k][1] && a->y1 <= fx[k][1] + fx[k][3];
        off_frame += !in;
        for (const char *s = svg; (s = strstr(s, "<circle class=\"")); s++) {
            double cx, cy, r;
            const char *c = strstr(s, " cx=\"");
            if (!c || sscanf(c, " cx=\"%lf\" cy=\"%lf\" r=\"%lf\"", &cx, &cy, &r) != 3) break;
            on_marker += boxes_meet(a->x0, a->y0, a->x1, a->y1, cx - r, cy - r, cx + r, cy + r);
        }
    }
    snprintf(name, sizeof name, "chart %s: no two texts overlap (numbers, key, legends, ticks, title)", what);
    check(n > 10 && clash == 0, name, "%d texts, %d overlaps, first %s", n, clash, why);
    snprintf(name, sizeof name, "chart %s: every text inside the viewBox", what);
    check(outside == 0, name, "%d outside %.0f x %.0f", outside, w, h);
    snprintf(name, sizeof name, "chart %s: every point numbered in both panels, each number inside its frame and on "
                                "no marker", what);
    check(numbers == want_numbers && off_frame == 0 && on_marker == 0 && frames == 2, name,
          "%d numbers (want %d), %d outside the frames, %d on a marker, %d frames", numbers, want_numbers, off_frame,
          on_marker, frames);
    free(t);
}

#endif
