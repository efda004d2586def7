/* tests/test_chart.c: eval/chart.c. chart_pareto_front (and the delta-ppl panel's) on hand-made
 * cases whose front is known (ties, dominated points, KL 0 against rounding below 0, non-finite
 * values); then SVGs of a realistic 12-point sweep, of no points, and of hostile values (NaN, inf,
 * 1e300, control bytes, invalid UTF-8) written to temp files and read back: no "nan"/"inf", every
 * label XML-escaped in the key after its number, every coordinate inside the viewBox, each panel's
 * front drawn filled in its colour, a bar per standard error, the same bytes twice. The label boxes
 * (test_label_boxes): the README's four sweep charts, made from their committed results.csv, a
 * crowded sweep (12 points within 0.25 bits) and the two above have no text on another, none
 * outside the viewBox, every number inside its panel and on no marker, measured with DejaVu Sans's
 * own advance widths.
 * Every SVG here and every committed one under data/ passes tests/svg_check.h (strict XML, kvq's
 * SVG elements, finite geometry), which is hand-checked first on broken SVGs it must refuse.
 * Two checks run outside programs, each skipped with a SKIP line (not a FAIL: the README's set-up
 * installs neither) when its program is missing: python3's xml.etree parses each SVG (only basic
 * elements), and rsvg-convert (Debian librsvg2-bin, which .ci/run installs) renders it to a PNG. */
#include "tests/test.h"
#include "tests/svg_check.h"
#include "tests/svg_text_boxes.h"
#include "eval/chart.h"
#include "eval/svg.h"
#include <ctype.h>
#include <glob.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* front[] must come back exactly want[] (the array starts poisoned, so every entry is written). */
static void check_front(const char *name, const ChartPoint *p, int n, const unsigned char *want) {
    unsigned char front[16];
    memset(front, 7, sizeof front);
    chart_pareto_front(p, n, front);
    char got[32] = "", exp[32] = "";
    for (int i = 0; i < n; i++) got[i] = (char)('0' + front[i]), exp[i] = (char)('0' + want[i]);
    check(strcmp(got, exp) == 0, name, "front %s, want %s", got, exp);
}

static void test_pareto(void) {
    ChartPoint one[] = {{"a", 4, 1e-3, 0, 0}};
    check_front("pareto: a single point is the front", one, 1, (const unsigned char[]){1});
    ChartPoint dom[] = {{"a", 4, 1e-3, 0, 0}, {"b", 5, 2e-3, 0, 0}, {"c", 3, 5e-3, 0, 0}};
    check_front("pareto: more bits and more KL is dominated, fewer bits and more KL is not", dom, 3,
                (const unsigned char[]){1, 0, 1});
    ChartPoint ties[] = {{"a", 4, 1e-3, 0, 0}, {"b", 4, 1e-3, 0, 0}, {"c", 4, 2e-3, 0, 0}, {"d", 6, 1e-3, 0, 0}};
    check_front("pareto: equal points are both on it; same bits worse KL and same KL more bits are not", ties, 4,
                (const unsigned char[]){1, 1, 0, 0});
    ChartPoint zero[] = {{"a", 4, 0, 0, 0}, {"b", 4, -1e-12, 0, 0}, {"c", 5, 1e-9, 0, 0}};
    check_front("pareto: KL -1e-12 ties KL 0 (rounding), and both dominate KL 1e-9 at more bits", zero, 3,
                (const unsigned char[]){1, 1, 0});
    ChartPoint bad[] = {{"a", NAN, 0, 0, 0}, {"b", 2, NAN, 0, 0}, {"c", 3, INFINITY, 0, 0}, {"d", 4, 1e-3, 0, 0},
                        {"e", INFINITY, 0, 0, 0}};
    check_front("pareto: non-finite bits or KL are off the front and dominate nothing", bad, 5,
                (const unsigned char[]){0, 0, 0, 1, 0});
    chart_pareto_front(NULL, 0, NULL);
    check(1, "pareto: n = 0 touches nothing", "%s", "");
    /* the delta-ppl panel's front: its own values, negative ones included, KL not looked at */
    unsigned char got[4];
    ChartPoint d[] = {{"a", 4, 1e-3, 0.5, 0}, {"b", 4, 1e-9, 0.7, 0}, {"c", 5, 1e-2, -0.1, 0}, {"d", 3, 1, NAN, 0}};
    chart_pareto_front_dppl(d, 4, got);
    check(got[0] == 1 && got[1] == 0 && got[2] == 1 && got[3] == 0,
          "pareto delta ppl: by delta ppl (a negative one too), not KL; a non-finite one is off it", "%d%d%d%d", got[0],
          got[1], got[2], got[3]);
}

/* A sweep like the README's, bits 2..16, KL 1e-5..1 and one 0, delta ppl -0.1..+40 with standard
 * errors (none for fp16: no bar). */
static const ChartPoint SAMPLE[] = {
    {"fp16", 16, 0, 0.0, 0}, {"fp8-e4m3", 8, 3.1e-4, 0.08, 0.02}, {"int8-g64", 8.5, 1.2e-5, -0.1, 0.01},
    {"int4-g64", 4.5, 1.8e-3, 0.235, 0.05}, {"int4-g32", 5.0, 1.1e-3, 0.15, 0.04}, {"nf4-g64", 4.5, 1.5e-3, 0.2, 0.05},
    {"int3-g64", 3.5, 9e-3, 1.4, 0.2}, {"int2-g64", 2.5, 0.21, 18.0, 1.5}, {"int2-g32", 3.0, 0.12, 9.5, 1.0},
    {"K int2-t32 / V int2-g32", 2.0, 1.0, 40.0, 3.0}, {"tq3 <&>\"'", 3.25, 5e-3, 0.9, 0.1},
    {"int4-g128", 4.25, 2.4e-3, 0.31, 0.06},
};
#define N_SAMPLE 12
/* int4-g64 is dominated by nf4-g64 (same bits, less KL), int3-g64 by tq3 (fewer bits, less KL). */
static const unsigned char SAMPLE_FRONT[N_SAMPLE] = {1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1};
/* By delta ppl: int4-g64 by nf4-g64 again, int3-g64 by tq3 (1.4 against 0.9), fp16 by int8-g64
 * (8.5 bits and -0.1 against 16 and 0). */
static const unsigned char SAMPLE_DFRONT[N_SAMPLE] = {0, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1};

/* The whole file as a string (NULL when it cannot be read). */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n + 4096 + 1 > cap) {
            char *grown = realloc(buf, cap = 2 * cap + 8192);
            if (!grown) { free(buf); fclose(f); return NULL; }
            buf = grown;
        }
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    fclose(f);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

/* Writes the chart to a new temp file (path out) and returns its text; *rc is chart_write_svg's. */
static char *write_chart(const char *title, const ChartPoint *p, int n, char path[64], int *rc) {
    strcpy(path, "/tmp/kvq-chart-XXXXXX");
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) { *rc = -2; return NULL; }
    *rc = chart_write_svg(f, title, p, n);
    fclose(f);
    return slurp(path, NULL);
}

static size_t count(const char *hay, const char *needle) {
    size_t k = 0;
    for (const char *s = hay; (s = strstr(s, needle)); s += strlen(needle)) k++;
    return k;
}

static int contains_ci(const char *hay, const char *needle) {
    for (size_t n = strlen(needle); *hay; hay++) {
        size_t i = 0;
        while (i < n && tolower((unsigned char)hay[i]) == needle[i]) i++;
        if (i == n) return 1;
    }
    return 0;
}

/* Out-of-range coordinates in svg: every x, y, x1..y2, cx, cy attribute, every rect's right and
 * bottom edge and every polyline vertex must be a number inside the viewBox. *checked counts them. */
static int coords_outside(const char *svg, int *checked, char *why, size_t why_len) {
    double w = -1, h = -1;
    const char *vb = strstr(svg, "viewBox=\"");
    if (!vb || sscanf(vb, "viewBox=\"0 0 %lf %lf\"", &w, &h) != 2) { snprintf(why, why_len, "no viewBox"); return 1; }
    static const char *const attrs[] = {" x=\"", " x1=\"", " x2=\"", " cx=\"", " width=\"", " y=\"", " y1=\"", " y2=\"", " cy=\"", " height=\""};
    int bad = 0;
    *checked = 0;
    for (int a = 0; a < 10; a++) {
        double lim = a < 5 ? w : h;
        for (const char *s = svg; (s = strstr(s, attrs[a]));) {
            s += strlen(attrs[a]);
            char *end;
            double v = strtod(s, &end);
            (*checked)++;
            if (end == s || *end != '"' || !(v >= 0 && v <= lim)) {
                if (!bad++) snprintf(why, why_len, "%s%.40s", attrs[a] + 1, s);
            }
        }
    }
    for (const char *s = svg; (s = strstr(s, "<rect x=\""));) {    /* right and bottom edges */
        double x, y, rw, rh;
        s += 6;
        if (sscanf(s, "x=\"%lf\" y=\"%lf\" width=\"%lf\" height=\"%lf\"", &x, &y, &rw, &rh) != 4 || x + rw > w || y + rh > h)
            if (!bad++) snprintf(why, why_len, "rect %.60s", s);
    }
    for (const char *s = svg; (s = strstr(s, " points=\""));) {
        s += 9;
        while (*s != '"') {
            char *end, *end2;
            double x = strtod(s, &end), y = *end == ',' ? strtod(end + 1, &end2) : NAN;
            (*checked)++;
            if (*end != ',' || !(x >= 0 && x <= w && y >= 0 && y <= h)) {
                if (!bad++) snprintf(why, why_len, "points %.40s", s);
                break;
            }
            s = end2;
            while (*s == ' ') s++;
        }
    }
    return bad;
}

/* Point markers (circles with a class) inside the first and the second panel frame (the rects
 * drawn with fill="none"), and outside both (the legend's). */
static void markers_per_panel(const char *svg, int in[3]) {
    double fx[2][4] = {{0}};
    int frames = 0;
    for (const char *s = svg; frames < 2 && (s = strstr(s, "<rect x=\""));) {
        s += 6;
        double *r = fx[frames];
        int end = -1;    /* set only when the text matched through fill="none" */
        sscanf(s, "x=\"%lf\" y=\"%lf\" width=\"%lf\" height=\"%lf\" fill=\"none\"%n", &r[0], &r[1], &r[2], &r[3], &end);
        frames += end > 0;
    }
    in[0] = in[1] = in[2] = 0;
    for (const char *s = svg; (s = strstr(s, "<circle class=\""));) {
        s = strstr(s, " cx=\"");
        double cx, cy;
        if (!s || sscanf(s, " cx=\"%lf\" cy=\"%lf\"", &cx, &cy) != 2) break;
        int k = 0;
        while (k < frames && !(cx >= fx[k][0] && cx <= fx[k][0] + fx[k][2] && cy >= fx[k][1] && cy <= fx[k][1] + fx[k][3])) k++;
        in[k < frames ? k : 2]++;
        s++;
    }
}

/* The label as XML text, escaped here independently of eval/chart.c. */
static void escape(const char *s, char *out) {
    for (*out = 0; *s; s++) {
        const char *e = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '"' ? "&quot;"
                      : *s == '\'' ? "&apos;" : NULL;
        if (e) strcat(out, e);
        else strncat(out, s, 1);
    }
}

/* Checks every chart must pass: written, no nan/inf, coordinates inside the viewBox. */
static void check_common(const char *what, const char *svg, int rc) {
    char name[160], why[128] = "";
    snprintf(name, sizeof name, "chart %s: chart_write_svg returns 0 and the file reads back", what);
    if (!check(rc == 0 && svg, name, "rc %d", rc)) return;
    snprintf(name, sizeof name, "chart %s: no nan or inf anywhere in the SVG", what);
    check(!contains_ci(svg, "nan") && !contains_ci(svg, "inf"), name, "found one");
    int checked = 0, bad = coords_outside(svg, &checked, why, sizeof why);
    snprintf(name, sizeof name, "chart %s: every coordinate is a number inside the viewBox", what);
    check(bad == 0 && checked > 40, name, "%d of %d bad, first %s", bad, checked, why);
    snprintf(name, sizeof name, "chart %s: has the three axis titles", what);
    check(strstr(svg, ">effective bits per value<") && strstr(svg, ">mean KL divergence (nats/token)<") &&
          strstr(svg, ">delta perplexity (%)<"), name, "missing");
}

/* Point number's key entry: the text of the key lines after its bold number, put together (the
 * key breaks a long label over lines), as written (escaped). 0 when the number is not in the key. */
static int key_entry(const char *svg, int number, char *out, size_t len) {
    char pat[64];
    snprintf(pat, sizeof pat, "font-weight=\"bold\">%d</text>\n", number);
    const char *s = strstr(svg, pat);
    if (!s) return 0;
    s += strlen(pat);
    out[0] = 0;
    while (!strncmp(s, "<text class=\"key\"", 17)) {
        const char *close = strchr(s, '>'), *stop = close ? strstr(close, "</text>") : NULL, *bold = strstr(s, "bold");
        if (!stop || (bold && bold < close)) break;
        strncat(out, close + 1, (size_t)(stop - close - 1) < len - strlen(out) - 1 ? (size_t)(stop - close - 1)
                                                                                   : len - strlen(out) - 1);
        s = stop + 8;
    }
    return 1;
}

/* px per delta-ppl unit of the bottom panel, from its tick labels (y = tick + 4, right-aligned at
 * x 80) "0" and "10": read from the file, not from eval/chart.c's mapping. */
static double dppl_scale(const char *svg, double *zero_y) {
    double y0 = NAN, y10 = NAN;
    for (const char *s = svg; (s = strstr(s, "<text x=\"80.00\" y=\"")); s++) {
        double y;
        char label[16];
        if (sscanf(s, "<text x=\"80.00\" y=\"%lf\" text-anchor=\"end\" font-size=\"12\">%15[^<]", &y, label) != 2) continue;
        if (!strcmp(label, "0") && y > 372) y0 = y - 4;
        if (!strcmp(label, "10") && y > 372) y10 = y - 4;
    }
    *zero_y = y0;
    return (y0 - y10) / 10;
}

/* The bottom panel's bars: each vertical #666 line centred on a marker there, and its half length
 * in delta ppl units; returns how many; *worst the largest |half length - SE| over the points. */
static int bars_found(const char *svg, double *worst) {
    double zero_y, scale = dppl_scale(svg, &zero_y);
    int found = 0;
    *worst = isfinite(scale) && scale > 0 ? 0 : INFINITY;
    for (const char *s = svg; (s = strstr(s, "<line x1=\"")); s++) {
        double x1, y1, x2, y2;
        if (sscanf(s, "<line x1=\"%lf\" y1=\"%lf\" x2=\"%lf\" y2=\"%lf\" stroke=\"#666\"", &x1, &y1, &x2, &y2) != 4 ||
            x1 != x2 || y1 < 372) continue;
        double mid = (y1 + y2) / 2, half = fabs(y2 - y1) / 2 / scale, dppl = (zero_y - mid) / scale;
        for (int i = 0; i < N_SAMPLE; i++)    /* the point at this delta ppl (the sample's are apart) */
            if (fabs(dppl - SAMPLE[i].dppl_pct) < 0.02 * fmax(1, fabs(SAMPLE[i].dppl_pct))) {
                found++;
                *worst = fmax(*worst, fabs(half - SAMPLE[i].dppl_pct_se));
            }
    }
    return found;
}

static void test_sample_svg(const char *title, const char *path, const char *svg) {
    size_t missing = 0;
    char esc[256], first[300] = "", entry[1200];
    for (int i = 0; i < N_SAMPLE; i++) {
        escape(SAMPLE[i].label, esc);
        if (SAMPLE[i].kl_mean <= 0) strcat(esc, " (KL &lt;= 0)");
        int found = key_entry(svg, i + 1, entry, sizeof entry);
        if ((!found || strcmp(entry, esc)) && !missing++)
            snprintf(first, sizeof first, "number %d: key has '%.120s', want '%.120s'", i + 1, found ? entry : "nothing",
                     esc);
    }
    check(missing == 0, "chart sample: the key gives every number its label, XML-escaped", "%s", first);
    check(!strstr(svg, "<&>") && strstr(svg, ">tq3 &lt;&amp;&gt;&quot;&apos;<"),
          "chart sample: the label <&>\"' is written as entities, never raw", "raw or missing");
    check(strstr(svg, ">fp16 (KL &lt;= 0)<") != NULL, "chart sample: the KL 0 point is drawn and says so", "missing");
    int on = 0, don = 0;
    for (int i = 0; i < N_SAMPLE; i++) on += SAMPLE_FRONT[i], don += SAMPLE_DFRONT[i];
    size_t filled = count(svg, "<circle class=\"front\""), dfilled = count(svg, "<circle class=\"dfront\""),
           hollow = count(svg, "<circle class=\"other\"");
    check(filled == (size_t)on + 1 && dfilled == (size_t)don + 1 && hollow == (size_t)(2 * N_SAMPLE - on - don + 2),
          "chart sample: each panel's front filled in its own class, others hollow (+ the legends' markers)",
          "%zu KL front, %zu delta ppl front, %zu hollow; want %d, %d, %d", filled, dfilled, hollow, on + 1, don + 1,
          2 * N_SAMPLE - on - don + 2);
    unsigned char dfront[N_SAMPLE];
    chart_pareto_front_dppl(SAMPLE, N_SAMPLE, dfront);
    check(memcmp(dfront, SAMPLE_DFRONT, N_SAMPLE) == 0, "pareto delta ppl: the 12-point sample's front is the hand-derived one",
          "differs");
    int in[3];
    markers_per_panel(svg, in);
    check(in[0] == N_SAMPLE && in[1] == N_SAMPLE && in[2] == 4,
          "chart sample: every point's marker lies inside each panel's frame (the KL 0 one too)",
          "%d in the top panel, %d in the bottom one, %d outside (want %d, %d, 4: the legends)", in[0], in[1], in[2],
          N_SAMPLE, N_SAMPLE);
    check(count(svg, "<polyline") == 2, "chart sample: each panel's front is one polyline", "%zu", count(svg, "<polyline"));
    check(strstr(svg, ">Pareto front of bits and KL (this panel)<") &&
          strstr(svg, ">Pareto front of bits and delta ppl (this panel)<") && strstr(svg, ">+/- 1 standard error<"),
          "chart sample: each panel's legend names its own front, the bottom one its bars", "missing");
    double worst;
    int bars = bars_found(svg, &worst);
    check(bars == N_SAMPLE - 1 && worst < 0.01, "chart sample: a bar of +/- one standard error on each delta ppl (none "
          "where it is 0), read against the axis' ticks", "%d bars (want %d), worst |half length - SE| %g", bars,
          N_SAMPLE - 1, worst);
    check(strstr(svg, "end\" font-size=\"12\">1e-6<") && strstr(svg, "end\" font-size=\"12\">1e-3<") &&
          strstr(svg, "end\" font-size=\"12\">1<") && !strstr(svg, ">1e-7<"),
          "chart sample: KL decade labels 1e-6 .. 1 (one below 1.2e-5 for the KL 0 point)", "missing");
    check(strstr(svg, "middle\" font-size=\"12\">16<") && strstr(svg, "end\" font-size=\"12\">40<") &&
          strstr(svg, "end\" font-size=\"12\">0<") && !strstr(svg, ">-0<"),
          "chart sample: nice tick labels for bits and delta ppl", "missing");
    int rc;
    char path2[64];
    char *again = write_chart(title, SAMPLE, N_SAMPLE, path2, &rc);
    check(again && strcmp(again, svg) == 0, "chart sample: the same input gives the same bytes", "differs");
    free(again);
    unlink(path2);
    FILE *ro = fopen(path, "r");    /* writes to a read-only stream fail */
    check(ro && chart_write_svg(ro, "x", SAMPLE, N_SAMPLE) == -1, "chart_write_svg returns -1 when writes fail", "0");
    if (ro) fclose(ro);
}

/* Exit status of a shell command, -1 when it did not exit normally. */
static int run(const char *cmd) {
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int have(const char *program) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", program);
    return run(cmd) == 0;
}

/* python3 checks the file is XML with an <svg> root of basic elements only; with want_hex, that
 * the label with those UTF-8 bytes is the text of one <text> element (its key entry). */
static const char PY_CHECK[] =
    "import sys, xml.etree.ElementTree as ET\n"
    "NS = '{http://www.w3.org/2000/svg}'\n"
    "root = ET.parse(sys.argv[1]).getroot()\n"
    "ok = {NS + t for t in ('svg', 'g', 'rect', 'line', 'polyline', 'circle', 'text')}\n"
    "bad = sorted({e.tag for e in root.iter()} - ok)\n"
    "if root.tag != NS + 'svg' or bad: sys.exit('xml: root %s, other elements %s' % (root.tag, bad))\n"
    "if len(sys.argv) > 2:\n"
    "    want = bytes.fromhex(sys.argv[2]).decode('utf-8')\n"
    "    hits = sum(t == want or t.startswith(want + ' (KL') for t in (e.text or '' for e in root.iter(NS + 'text')))\n"
    "    if hits != 1: sys.exit('xml: label %r found %d times' % (want, hits))\n";

static void check_xml(const char *what, const char *script, const char *svg_path, const char *want) {
    char cmd[512], hex[128] = "", name[160];
    for (size_t i = 0; want && want[i] && i < 60; i++) snprintf(hex + 2 * i, 3, "%02x", (unsigned char)want[i]);
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s' %s", script, svg_path, hex);
    snprintf(name, sizeof name, "chart %s: python3 xml.etree parses it (svg root, basic elements only)%s", what,
             want ? ", the raw label read back" : "");
    check(run(cmd) == 0, name, "%s failed (its message is above)", cmd);
}

/* rsvg-convert makes a PNG of more than 1000 bytes with the PNG signature. */
static void check_render(const char *what, const char *svg_path, const char *png_path) {
    char cmd[512], name[160];
    snprintf(name, sizeof name, "chart %s: rsvg-convert renders it to a PNG", what);
    if (!have("rsvg-convert")) {
        printf("SKIP %s: rsvg-convert not found (Debian librsvg2-bin); svg_check's checks stand in\n", name);
        return;
    }
    snprintf(cmd, sizeof cmd, "rsvg-convert -o '%s' '%s'", png_path, svg_path);
    size_t len = 0;
    char *png = run(cmd) == 0 ? slurp(png_path, &len) : NULL;
    check(png && len > 1000 && memcmp(png, "\x89PNG\r\n\x1a\n", 8) == 0, name, "%s: %zu bytes%s", cmd, len,
          png ? "" : ", failed");
    free(png);
}

/* --- svg_check (tests/svg_check.h): what stands in for a renderer ------------------------------ */

static const char SVG_HEAD[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
                               "width=\"100\" height=\"50\" viewBox=\"0 0 100 50\">";

/* svg_check on SVG_HEAD + body + "</svg>" (or body alone when whole). */
static int svg_ok(const char *body, int whole, char *why, size_t why_len) {
    char text[1024];
    snprintf(text, sizeof text, "%s%s%s", whole ? "" : SVG_HEAD, body, whole ? "" : "</svg>");
    return svg_check(text, strlen(text), why, why_len);
}

/* The checker by hand: a small SVG of every element kvq writes passes; each broken one is refused
 * for its own reason (a checker that accepts anything would pass every SVG below). */
static void test_svg_check(void) {
    char why[200];
    int ok = svg_ok("<g><rect x=\"1\" y=\"2\" width=\"3\" height=\"4\" fill=\"none\"><title>K &lt;0&gt; &#233;&#xe9;</title>"
                    "</rect><line x1=\"0\" y1=\"0\" x2=\"5e1\" y2=\"-1.5\"/><polyline points=\"1,2 3,4 5,6\"/>"
                    "<circle cx=\"3\" cy=\"4\" r=\"2\"/><text x='1' y='2' font-size=\"12\">a &amp; b \xc3\xa9</text></g>"
                    "<!-- a comment -->", 0, why, sizeof why);
    check(ok, "svg_check: a small SVG of every element kvq writes is accepted", "%s", why);
    static const struct { const char *body; int whole; const char *what; } bad[] = {
        {"<g><text x=\"1\" y=\"2\">a</g></text>", 0, "tags closed in the wrong order"},
        {"<g>", 0, "an element left open"},
        {"<text x=\"1\" y=\"2\">a & b</text>", 0, "a bare '&'"},
        {"<text x=\"1\" y=\"2\">&nbsp;</text>", 0, "an entity XML does not define"},
        {"<text x=\"1\" y=\"2\">&#1;</text>", 0, "a reference to a control character"},
        {"<text x=1 y=\"2\">a</text>", 0, "an unquoted attribute"},
        {"<text x=\"1\" x=\"2\">a</text>", 0, "an attribute twice"},
        {"<text x=\"1\"y=\"2\">a</text>", 0, "attributes without a space between"},
        {"<text x=\"1\" y=\"<2\">a</text>", 0, "'<' in a value"},
        {"<text x=\"1\" y=\"2\">a\x01</text>", 0, "a control byte"},
        {"<text x=\"1\" y=\"2\">\xc3(</text>", 0, "a UTF-8 sequence cut short"},
        {"<text x=\"1\" y=\"2\">\xc0\xaf</text>", 0, "an overlong UTF-8 form"},
        {"<text x=\"nan\" y=\"2\">a</text>", 0, "x = nan"},
        {"<circle cx=\"1\" cy=\"inf\" r=\"2\"/>", 0, "cy = inf"},
        {"<rect x=\"1\" y=\"2\" width=\"-3\" height=\"4\"/>", 0, "a negative width"},
        {"<line x1=\"1\" y1=\"\" x2=\"1\" y2=\"2\"/>", 0, "an empty coordinate"},
        {"<polyline points=\"1,2 3\"/>", 0, "points not in pairs"},
        {"<polyline points=\"1,2 3,nan\"/>", 0, "a point at nan"},
        {"<path d=\"M0 0\"/>", 0, "an element kvq does not write"},
        {"<!DOCTYPE svg>", 0, "a DOCTYPE"},
        {"<!-- a -- b -->", 0, "'--' inside a comment"},
        {"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\" viewBox=\"0 0 1 1\"></svg>x", 1,
         "text after the root"},
        {"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\" viewBox=\"0 0 1 1\"></svg><svg "
         "xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\" viewBox=\"0 0 1 1\"></svg>", 1, "two roots"},
        {"<svg width=\"1\" height=\"1\" viewBox=\"0 0 1 1\"></svg>", 1, "no SVG namespace"},
        {"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\"></svg>", 1, "no viewBox"},
        {"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\" viewBox=\"0 0 nan 1\"></svg>", 1,
         "a viewBox of nan"},
        {"<g xmlns=\"http://www.w3.org/2000/svg\"></g>", 1, "a root that is not <svg>"},
        {"", 1, "no element at all"},
    };
    int n_bad = (int)(sizeof bad / sizeof *bad), accepted = -1;
    char last[200] = "";
    for (int i = 0; i < n_bad && accepted < 0; i++) {
        if (svg_ok(bad[i].body, bad[i].whole, why, sizeof why)) accepted = i;
        else snprintf(last, sizeof last, "%s", why);
    }
    check(accepted < 0, "svg_check: 28 broken SVGs refused (tags, entities, quotes, bytes, numbers, elements, root)",
          "accepted %s (last refusal: %s)", accepted >= 0 ? bad[accepted].what : "", last);
}

/* svg_check on the SVG file at path; the check is named by what. */
static void check_svg_file(const char *what, const char *path) {
    size_t len = 0;
    char *text = slurp(path, &len), why[200] = "cannot read it", name[320];
    snprintf(name, sizeof name, "svg_check %s: well-formed XML, kvq's SVG elements, finite geometry", what);
    check(text && svg_check(text, len, why, sizeof why), name, "%s: %s", path, why);
    free(text);
}

/* Every SVG the repository ships (the README's charts and their siblings), each written by one of
 * eval/'s SVG writers: the sweep chart, position and layer lines, the heatmap, the calibration's
 * channel chart. */
static void test_committed_svgs(void) {
    glob_t g;
    int n = 0;
    static const char *const patterns[] = {"data/*/*/*.svg", "data/*/*/*/*.svg"};
    for (int p = 0; p < 2; p++) {
        if (glob(patterns[p], 0, NULL, &g) != 0) continue;
        for (size_t i = 0; i < g.gl_pathc; i++, n++) check_svg_file(g.gl_pathv[i], g.gl_pathv[i]);
        globfree(&g);
    }
    check(n >= 20, "svg_check: the committed SVGs under data/ found (the README's charts among them)", "%d found", n);
}

/* A committed sweep's results.csv as chart points (labels as eval/sweep_report.c writes them: the
 * scheme, or "K k / V v"); the number of points, -1 when the file does not read. */
static int read_sweep_csv(const char *path, ChartPoint *p, char (*labels)[160], int max) {
    char *text = slurp(path, NULL);
    if (!text) return -1;
    static const char *const want[] = {"k_scheme", "v_scheme", "effective_bits", "kl_mean", "delta_percent",
                                       "delta_percent_stderr"};
    int col[6] = {-1, -1, -1, -1, -1, -1}, n = 0, k = 0;
    char *save = NULL, *row = strtok_r(text, "\n", &save);
    for (char *f = row; f; f = strchr(f, ','), f = f ? f + 1 : NULL, k++)
        for (int c = 0; c < 6; c++)
            if (!strncmp(f, want[c], strlen(want[c])) && (f[strlen(want[c])] == ',' || !f[strlen(want[c])])) col[c] = k;
    for (int c = 0; c < 6; c++)
        if (col[c] < 0) { free(text); return -1; }
    while ((row = strtok_r(NULL, "\n", &save)) && n < max) {
        char field[32][128] = {{0}};
        int nf = 0;
        for (const char *s = row; nf < 32;) {    /* quoted fields: the schemes; "" is a quote */
            size_t len = 0;
            if (*s == '"') {
                for (s++; *s && !(*s == '"' && s[1] != '"'); s++) {
                    if (*s == '"') s++;
                    if (len < 127) field[nf][len++] = *s;
                }
                if (*s == '"') s++;
            } else {
                while (*s && *s != ',') { if (len < 127) field[nf][len++] = *s; s++; }
            }
            nf++;
            if (*s != ',') break;
            s++;
        }
        const char *ks = field[col[0]], *vs = field[col[1]];
        if (!strcmp(ks, vs)) snprintf(labels[n], 160, "%s", ks);
        else snprintf(labels[n], 160, "K %s / V %s", ks, vs);
        p[n] = (ChartPoint){labels[n], atof(field[col[2]]), atof(field[col[3]]), atof(field[col[4]]), atof(field[col[5]])};
        n++;
    }
    free(text);
    return n;
}

/* The README's charts, from the committed sweeps' results.csv, and a crowded synthetic sweep: 12
 * points within 0.25 bits, KL and delta ppl close together, labels as long as a sweep's. */
static void test_label_boxes(void) {
    static const char *const demos[] = {"data/sweeps/mini-llama-brown", "data/sweeps/mini-llama-brown-outliers",
                                        "data/sweeps/calibrated-mini-llama-brown",
                                        "data/sweeps/calibrated-mini-llama-brown-outliers"};
    ChartPoint p[64];
    char labels[64][160], path[300], svg_path[64];
    for (int d = 0; d < 4; d++) {
        snprintf(path, sizeof path, "%s/results.csv", demos[d]);
        int n = read_sweep_csv(path, p, labels, 64), rc;
        char what[200];
        snprintf(what, sizeof what, "of %s", demos[d]);
        char name[260];
        snprintf(name, sizeof name, "chart %s: results.csv read (more than 10 configurations)", what);
        if (!check(n > 10, name, "%d", n)) continue;
        char *svg = write_chart("KV-cache schemes on data/models/mini-llama-brown-outliers (ctx 1024, 8703 tokens)", p, n,
                                svg_path, &rc);
        check_label_boxes(what, rc == 0 ? svg : NULL, 2 * n);
        free(svg);
        unlink(svg_path);
    }
    ChartPoint crowd[12];
    static const char *const names[12] = {"int4-g64", "int4-g64+had", "q4_0", "q4_0+had", "nf4-g64", "tq4",
                                          "K int4-g64+prerope / V int4-g64", "iq4_nl", "nuq4-g64", "int4-g32",
                                          "K int4-t32-asym+res32 / V int4-g32-asym+res32", "q4_1"};
    for (int i = 0; i < 12; i++)
        crowd[i] = (ChartPoint){names[i], 4.25 + 0.25 * i / 11.0, 0.01 * (1 + 0.05 * (i % 5)), 0.5 + 0.1 * (i % 4),
                                0.3};
    int rc;
    char *svg = write_chart("crowded", crowd, 12, svg_path, &rc);
    check_label_boxes("of 12 points within 0.25 bits", rc == 0 ? svg : NULL, 24);
    free(svg);
    unlink(svg_path);
}

/* The note of numbers left out agrees with its count ("1 number ... its point", "N numbers ...
 * their points"): crowded sweeps of 30..40 points, among which some leave one number out and some
 * more (checked too, so the check cannot pass on charts that leave none out). */
static void test_left_out_note(void) {
    static char labels[40][8];
    ChartPoint p[40];
    int ones = 0, more = 0, wrong = 0;
    char why[160] = "";
    for (int n = 30; n <= 40; n++) {
        for (int i = 0; i < n; i++) {
            snprintf(labels[i], sizeof labels[i], "s%d", i);
            p[i] = (ChartPoint){labels[i], 4.0 + 0.01 * (i % 7), 0.01 * (1 + 0.01 * i), 0.5 + 0.001 * i, 0.1};
        }
        int rc;
        char path[64];
        char *svg = write_chart("crowded", p, n, path, &rc);
        unlink(path);
        const char *note = svg ? strstr(svg, " left out: ") : NULL;
        if (note) {
            while (note > svg && note[-1] != '>') note--;
            int k = atoi(note);
            int ok = k == 1 ? !strncmp(note, "1 number left out: no room beside its point<", 44)
                            : k > 1 && strstr(note, " numbers left out: no room beside their points<") != NULL;
            ones += ok && k == 1, more += ok && k > 1;
            if (!ok && !wrong++) snprintf(why, sizeof why, "%d points: '%.60s'", n, note);
        }
        free(svg);
    }
    check(!wrong && ones > 0 && more > 0, "chart: the note of numbers left out agrees with its count (1 number, N numbers)",
          "%d charts with one left out, %d with more, %d wrong: %s", ones, more, wrong, why);
}

/* svg_text_n's output for the first n bytes of s, into out. */
static void svg_of(const char *s, size_t n, char *out, size_t len) {
    FILE *f = tmpfile();
    if (!f) { out[0] = 0; return; }
    svg_text_n(f, s, n);
    rewind(f);
    size_t got = fread(out, 1, len - 1, f);
    out[got] = 0;
    fclose(f);
}

/* The escaper every SVG writer shares (eval/svg.c), by hand: entities, control bytes, a UTF-8
 * sequence kept whole or, when the n bytes cut it, replaced. */
static void test_svg_text(void) {
    static const struct { const char *in; size_t n; const char *want; } cases[] = {
        {"a<b&\"c'>", 9, "a&lt;b&amp;&quot;c&apos;&gt;"},
        {"a\xc3\xa9z", 4, "a\xc3\xa9z"},      /* e-acute kept */
        {"a\xc3\xa9z", 2, "a?"},               /* cut after its first byte */
        {"\xe2\x82\xac", 2, "??"},            /* a euro sign cut after two of three bytes */
        {"\xe2\x82\xac", 3, "\xe2\x82\xac"},
        {"ab\x01\x7f\xff", 5, "ab???"},
        {"abc", 2, "ab"},
        {"a\0bc", 4, "a"},                     /* stops at a NUL */
    };
    size_t n_cases = sizeof cases / sizeof cases[0], bad = n_cases;
    char got[64] = "";
    for (size_t i = 0; i < n_cases && bad == n_cases; i++) {
        svg_of(cases[i].in, cases[i].n, got, sizeof got);
        if (strcmp(got, cases[i].want) != 0) bad = i;
    }
    check(bad == n_cases, "svg_text_n: entities, control bytes, UTF-8 kept whole or cut to '?' (8 cases)",
          "case %zu: got '%s', want '%s'", bad, got, bad < n_cases ? cases[bad].want : "");
}

/* test_chart --svg-check FILE: svg_check on one file, for the shell tests' SVGs (tests/cli_helpers.sh,
 * check_svg): exit 0, or 1 with the problem on stderr. */
static int svg_check_main(const char *path) {
    size_t len = 0;
    char *text = slurp(path, &len), why[200] = "cannot read it";
    int ok = text && svg_check(text, len, why, sizeof why);
    if (!ok) fprintf(stderr, "%s: %s\n", path, why);
    free(text);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--svg-check")) return svg_check_main(argv[2]);
    test_pareto();
    test_svg_text();
    unsigned char front[N_SAMPLE];
    chart_pareto_front(SAMPLE, N_SAMPLE, front);
    check(memcmp(front, SAMPLE_FRONT, N_SAMPLE) == 0, "pareto: the 12-point sample's front is the hand-derived one",
          "differs");

    static const ChartPoint HOSTILE[] = {
        {"nan bits", NAN, 1e-3, 1, 0}, {"inf dppl", 4, 1e-3, INFINITY, 0}, {NULL, 4, NAN, 1e300, NAN},
        {"\x01" "ctl\xff\xc3(", 1e-320, -1e-12, -1e300, INFINITY}, {"huge KL", 1e300, 1e300, 0, 1e300}, {"same", 4, 1e-3, 0, -1},
        {"a very long configuration label that runs past the right edge of the plot area by far", 16, 1e-3, 0, 0.1},
    };
    char sample_path[64], empty_path[64], hostile_path[64], script[64] = "/tmp/kvq-chart-py-XXXXXX";
    int rc_sample, rc_empty, rc_hostile;
    const char *title = "KV cache quantization sweep <test> & \"co\"";
    char *sample = write_chart(title, SAMPLE, N_SAMPLE, sample_path, &rc_sample);
    char *empty = write_chart(NULL, NULL, 0, empty_path, &rc_empty);
    char *hostile = write_chart("hostile \x02\xe0\x80", HOSTILE, 7, hostile_path, &rc_hostile);
    check_common("sample", sample, rc_sample);
    check_common("with no points", empty, rc_empty);
    check_common("of hostile values", hostile, rc_hostile);
    if (sample && rc_sample == 0) test_sample_svg(title, sample_path, sample);
    check(empty && strstr(empty, ">no points<") && count(empty, "<circle") == 4,
          "chart with no points: says \"no points\" and draws only the legend markers", "missing");
    check(hostile && strstr(hostile, "2 of 7 configurations not shown") && strstr(hostile, ">?ctl?" "?( (KL &lt;= 0)<"),
          "chart of hostile values: the two non-finite points are counted out, bad bytes become '?'", "missing");
    int in[3] = {0};
    if (hostile) markers_per_panel(hostile, in);
    check(in[0] == 5 && in[1] == 5 && in[2] == 4, "chart of hostile values: the 5 drawable points lie inside both frames",
          "%d in the top panel, %d in the bottom one, %d outside", in[0], in[1], in[2]);
    check_label_boxes("sample", sample, 2 * N_SAMPLE);
    check_label_boxes("of hostile values", hostile, 10);
    test_svg_check();
    check_svg_file("chart sample", sample_path);
    check_svg_file("chart with no points", empty_path);
    check_svg_file("chart of hostile values", hostile_path);
    test_committed_svgs();

    int fd = mkstemp(script);
    if (!have("python3") || fd < 0) {
        printf("SKIP chart XML checks: python3 not found\n");
    } else {
        FILE *f = fdopen(fd, "w");
        fputs(PY_CHECK, f);
        fclose(f);
        check_xml("sample", script, sample_path, "tq3 <&>\"'");
        check_xml("with no points", script, empty_path, NULL);
        check_xml("of hostile values", script, hostile_path, NULL);
    }
    char png[80];
    snprintf(png, sizeof png, "%s.png", sample_path);
    check_render("sample", sample_path, png);
    unlink(png);
    snprintf(png, sizeof png, "%s.png", empty_path);
    check_render("with no points", empty_path, png);
    unlink(png);
    free(sample);
    free(empty);
    free(hostile);
    unlink(sample_path);
    unlink(empty_path);
    unlink(hostile_path);
    if (fd >= 0) unlink(script);
    test_label_boxes();
    test_left_out_note();
    return test_exit_code();
}
