/* tests/test_chart.c: eval/chart.c. chart_pareto_front on hand-made cases whose front is known
 * (ties, dominated points, KL 0 against rounding below 0, non-finite values); then SVGs of a
 * realistic 12-point sweep, of no points, and of hostile values (NaN, inf, 1e300, control bytes,
 * invalid UTF-8) written to temp files and read back: no "nan"/"inf", every label XML-escaped in
 * both panels, every coordinate inside the viewBox, the front drawn filled, the same bytes twice.
 * Two checks run outside programs: python3's xml.etree parses each SVG (only basic elements;
 * skipped with a SKIP line when python3 is missing) and rsvg-convert (Debian librsvg2-bin, which
 * .ci/run installs) renders it to a PNG; a missing rsvg-convert is a FAIL. */
#include "tests/test.h"
#include "eval/chart.h"
#include <ctype.h>
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
    ChartPoint one[] = {{"a", 4, 1e-3, 0}};
    check_front("pareto: a single point is the front", one, 1, (const unsigned char[]){1});
    ChartPoint dom[] = {{"a", 4, 1e-3, 0}, {"b", 5, 2e-3, 0}, {"c", 3, 5e-3, 0}};
    check_front("pareto: more bits and more KL is dominated, fewer bits and more KL is not", dom, 3,
                (const unsigned char[]){1, 0, 1});
    ChartPoint ties[] = {{"a", 4, 1e-3, 0}, {"b", 4, 1e-3, 0}, {"c", 4, 2e-3, 0}, {"d", 6, 1e-3, 0}};
    check_front("pareto: equal points are both on it; same bits worse KL and same KL more bits are not", ties, 4,
                (const unsigned char[]){1, 1, 0, 0});
    ChartPoint zero[] = {{"a", 4, 0, 0}, {"b", 4, -1e-12, 0}, {"c", 5, 1e-9, 0}};
    check_front("pareto: KL -1e-12 ties KL 0 (rounding), and both dominate KL 1e-9 at more bits", zero, 3,
                (const unsigned char[]){1, 1, 0});
    ChartPoint bad[] = {{"a", NAN, 0, 0}, {"b", 2, NAN, 0}, {"c", 3, INFINITY, 0}, {"d", 4, 1e-3, 0}, {"e", INFINITY, 0, 0}};
    check_front("pareto: non-finite bits or KL are off the front and dominate nothing", bad, 5,
                (const unsigned char[]){0, 0, 0, 1, 0});
    chart_pareto_front(NULL, 0, NULL);
    check(1, "pareto: n = 0 touches nothing", "%s", "");
}

/* A sweep like the README's, bits 2..16, KL 1e-5..1 and one 0, delta ppl -0.1..+40. */
static const ChartPoint SAMPLE[] = {
    {"fp16", 16, 0, 0.0},        {"fp8-e4m3", 8, 3.1e-4, 0.08}, {"int8-g64", 8.5, 1.2e-5, -0.1},
    {"int4-g64", 4.5, 1.8e-3, 0.235}, {"int4-g32", 5.0, 1.1e-3, 0.15}, {"nf4-g64", 4.5, 1.5e-3, 0.2},
    {"int3-g64", 3.5, 9e-3, 1.4}, {"int2-g64", 2.5, 0.21, 18.0}, {"int2-g32", 3.0, 0.12, 9.5},
    {"K int2-t32 / V int2-g32", 2.0, 1.0, 40.0}, {"tq3 <&>\"'", 3.25, 5e-3, 0.9}, {"int4-g128", 4.25, 2.4e-3, 0.31},
};
#define N_SAMPLE 12
/* int4-g64 is dominated by nf4-g64 (same bits, less KL), int3-g64 by tq3 (fewer bits, less KL). */
static const unsigned char SAMPLE_FRONT[N_SAMPLE] = {1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1};

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

static void test_sample_svg(const char *title, const char *path, const char *svg) {
    size_t missing = 0;
    char esc[256], first[256] = "", pat[300];
    for (int i = 0; i < N_SAMPLE; i++) {
        escape(SAMPLE[i].label, esc);
        snprintf(pat, sizeof pat, ">%s<", esc);
        size_t k = count(svg, pat);
        snprintf(pat, sizeof pat, ">%s (KL", esc);
        k += count(svg, pat);
        if (k != 2 && !missing++) snprintf(first, sizeof first, "%s found %zu times", esc, k);
    }
    check(missing == 0, "chart sample: every label appears XML-escaped once in each panel", "%s", first);
    check(!strstr(svg, "<&>") && strstr(svg, ">tq3 &lt;&amp;&gt;&quot;&apos;<"),
          "chart sample: the label <&>\"' is written as entities, never raw", "raw or missing");
    check(strstr(svg, ">fp16 (KL &lt;= 0)<") != NULL, "chart sample: the KL 0 point is drawn and says so", "missing");
    int on = 0;
    for (int i = 0; i < N_SAMPLE; i++) on += SAMPLE_FRONT[i];
    size_t filled = count(svg, "<circle class=\"front\""), hollow = count(svg, "<circle class=\"other\"");
    check(filled == (size_t)(2 * on + 1) && hollow == (size_t)(2 * (N_SAMPLE - on) + 1),
          "chart sample: front points filled, others hollow, in both panels (+1 legend marker each)",
          "%zu filled, %zu hollow, want %d and %d", filled, hollow, 2 * on + 1, 2 * (N_SAMPLE - on) + 1);
    int in[3];
    markers_per_panel(svg, in);
    check(in[0] == N_SAMPLE && in[1] == N_SAMPLE && in[2] == 2,
          "chart sample: every point's marker lies inside each panel's frame (the KL 0 one too)",
          "%d in the top panel, %d in the bottom one, %d outside (want %d, %d, 2: the legend)", in[0], in[1], in[2],
          N_SAMPLE, N_SAMPLE);
    check(count(svg, "<polyline") == 1, "chart sample: the front is one polyline", "%zu", count(svg, "<polyline"));
    check(strstr(svg, ">1e-6<") && strstr(svg, ">1e-3<") && strstr(svg, ">1<") && !strstr(svg, ">1e-7<"),
          "chart sample: KL decade labels 1e-6 .. 1 (one below 1.2e-5 for the KL 0 point)", "missing");
    check(strstr(svg, ">16<") && strstr(svg, ">40<") && strstr(svg, ">0<") && !strstr(svg, ">-0<"),
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
 * the label with those UTF-8 bytes is the text of two <text> elements (once "... (KL" in the top). */
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
    "    if hits != 2: sys.exit('xml: label %r found %d times' % (want, hits))\n";

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
        check(0, name, "rsvg-convert not found: install the Debian package librsvg2-bin");
        return;
    }
    snprintf(cmd, sizeof cmd, "rsvg-convert -o '%s' '%s'", png_path, svg_path);
    size_t len = 0;
    char *png = run(cmd) == 0 ? slurp(png_path, &len) : NULL;
    check(png && len > 1000 && memcmp(png, "\x89PNG\r\n\x1a\n", 8) == 0, name, "%s: %zu bytes%s", cmd, len,
          png ? "" : ", failed");
    free(png);
}

int main(void) {
    test_pareto();
    unsigned char front[N_SAMPLE];
    chart_pareto_front(SAMPLE, N_SAMPLE, front);
    check(memcmp(front, SAMPLE_FRONT, N_SAMPLE) == 0, "pareto: the 12-point sample's front is the hand-derived one",
          "differs");

    static const ChartPoint HOSTILE[] = {
        {"nan bits", NAN, 1e-3, 1}, {"inf dppl", 4, 1e-3, INFINITY}, {NULL, 4, NAN, 1e300}, {"\x01" "ctl\xff\xc3(", 1e-320, -1e-12, -1e300},
        {"huge KL", 1e300, 1e300, 0}, {"same", 4, 1e-3, 0},
        {"a very long configuration label that runs past the right edge of the plot area by far", 16, 1e-3, 0},
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
    check(empty && strstr(empty, ">no points<") && count(empty, "<circle") == 2,
          "chart with no points: says \"no points\" and draws only the legend markers", "missing");
    check(hostile && strstr(hostile, "2 of 7 configurations not shown") && strstr(hostile, ">?ctl?" "?(<"),
          "chart of hostile values: the two non-finite points are counted out, bad bytes become '?'", "missing");
    int in[3] = {0};
    if (hostile) markers_per_panel(hostile, in);
    check(in[0] == 5 && in[1] == 5 && in[2] == 2, "chart of hostile values: the 5 drawable points lie inside both frames",
          "%d in the top panel, %d in the bottom one, %d outside", in[0], in[1], in[2]);

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
    return test_exit_code();
}
