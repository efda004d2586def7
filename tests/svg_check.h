/* tests/svg_check.h: a strict check of the SVG files kvq writes, with no program outside the test
 * (it stands in for rendering them, which needs rsvg-convert, a package the README's set-up does
 * not install). svg_check() reads the whole text as XML 1.0 and refuses what a conforming parser
 * (expat, librsvg's libxml2) refuses: bytes that are not UTF-8, control characters, a tag not
 * closed or closed by another name, an attribute twice or unquoted, '<' in a value, '&' that is
 * not one of the five predefined entities or a character reference, text outside the root, more
 * than one root. On top of XML it asks what a renderer needs of kvq's subset of SVG 1.1: an <svg>
 * root in the SVG namespace with a viewBox "0 0 W H" and its width and height; only the elements
 * kvq writes (svg g rect line polyline circle text title); every geometric attribute a finite
 * number (a position or size may be a percentage; points: pairs of numbers), no negative width,
 * height or radius. Header-only, as test.h. */
#ifndef KVQ_SVG_CHECK_H
#define KVQ_SVG_CHECK_H
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SVG_MAX_DEPTH = 64, SVG_MAX_NAME = 32, SVG_MAX_ATTRS = 32 };

typedef struct {
    const char *s, *end;          /* the text still to read */
    const char *start;            /* the whole text, for offsets in messages */
    char why[200];                /* the first problem found */
    char open[SVG_MAX_DEPTH][SVG_MAX_NAME];
    int depth, roots, elements;
} SvgReader;

static int svg_fail(SvgReader *r, const char *fmt, ...) {
    if (!r->why[0]) {
        int n = snprintf(r->why, sizeof r->why, "byte %ld: ", (long)(r->s - r->start));
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->why + n, sizeof r->why - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return 0;
}

/* Bytes of the UTF-8 sequence at s (1-4), 0 when it is not one: overlong forms, surrogates and
 * code points past U+10FFFF are refused; so are C0 controls other than tab, LF and CR, which
 * XML 1.0 does not allow anywhere. */
static int svg_utf8_len(const unsigned char *s, const unsigned char *end) {
    unsigned c = s[0];
    if (c < 0x80) return c >= 0x20 || c == '\t' || c == '\n' || c == '\r' ? 1 : 0;
    int n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? (c <= 0xEF ? 3 : 0) : c >= 0xC2 && c <= 0xDF ? 2 : 0;
    if (!n || end - s < n) return 0;
    unsigned cp = c & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF)) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return n;
}

static int svg_name_char(char c, int first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && ((c >= '0' && c <= '9') || c == '-' || c == '.'));
}

/* A Name (ASCII: every name kvq writes) into out; 0 when there is none. */
static int svg_read_name(SvgReader *r, char out[SVG_MAX_NAME]) {
    size_t n = 0;
    while (r->s < r->end && svg_name_char(*r->s, n == 0)) {
        if (n + 1 >= SVG_MAX_NAME) return svg_fail(r, "a name longer than %d bytes", SVG_MAX_NAME - 1);
        out[n++] = *r->s++;
    }
    out[n] = 0;
    return n ? 1 : svg_fail(r, "a name expected, found '%.10s'", r->s);
}

static void svg_skip_space(SvgReader *r) {
    while (r->s < r->end && (*r->s == ' ' || *r->s == '\t' || *r->s == '\n' || *r->s == '\r')) r->s++;
}

/* Character data or an attribute value up to stop ('<' for text, the quote for a value): valid
 * UTF-8, '&' only as &amp; &lt; &gt; &quot; &apos; &#N; &#xH; (a character XML allows), no '<'. */
static int svg_read_chars(SvgReader *r, char stop) {
    static const char *const ents[] = {"amp;", "lt;", "gt;", "quot;", "apos;"};
    while (r->s < r->end && *r->s != stop) {
        if (*r->s == '<') return svg_fail(r, "'<' inside an attribute value");
        if (*r->s == '&') {
            r->s++;
            int ok = 0;
            for (int i = 0; i < 5 && !ok; i++)
                if (!strncmp(r->s, ents[i], strlen(ents[i]))) { r->s += strlen(ents[i]); ok = 1; }
            if (!ok && *r->s == '#') {
                int hex = r->s[1] == 'x';
                char *e;
                long cp = strtol(r->s + 1 + hex, &e, hex ? 16 : 10);
                ok = e > r->s + 1 + hex && *e == ';' && (cp == 9 || cp == 10 || cp == 13 || (cp >= 0x20 && cp <= 0xD7FF) ||
                                                        (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF));
                if (ok) r->s = e + 1;
            }
            if (!ok) return svg_fail(r, "'&' not an entity or character reference: '&%.8s'", r->s);
            continue;
        }
        if (stop == '<' && !strncmp(r->s, "]]>", 3)) return svg_fail(r, "']]>' in text");
        int n = svg_utf8_len((const unsigned char *)r->s, (const unsigned char *)r->end);
        if (!n) return svg_fail(r, "byte 0x%02x: not UTF-8 or a control character", (unsigned char)*r->s);
        r->s += n;
    }
    return 1;
}

/* <!-- comment --> (no "--" inside) or <?target ...?>, r->s at '<'. */
static int svg_read_misc(SvgReader *r) {
    const char *close;
    if (!strncmp(r->s, "<!--", 4)) {
        close = strstr(r->s + 4, "--");
        if (!close || close[2] != '>') return svg_fail(r, "a comment not closed by '-->' (or '--' inside it)");
        r->s = close + 3;
        return 1;
    }
    if (!strncmp(r->s, "<?", 2)) {
        close = strstr(r->s + 2, "?>");
        if (!close) return svg_fail(r, "'<?' not closed");
        r->s = close + 2;
        return 1;
    }
    return svg_fail(r, "'<!' (a DOCTYPE or CDATA) is not something kvq writes");
}

/* A finite number as SVG writes one (strtod's forms less hex, inf and nan); *end past it. */
static int svg_number(const char *s, const char **end, double *v) {
    while (*s == ' ' || *s == ',') s++;
    const char *p = s;
    if (*p == '+' || *p == '-') p++;
    if (!((*p >= '0' && *p <= '9') || *p == '.')) return 0;
    char *e;
    *v = strtod(s, &e);
    *end = e;
    return isfinite(*v);
}

/* The SVG rules of one start tag: its element and attributes (names[i] = values[i]). */
static int svg_check_element(SvgReader *r, const char *el, int n, char names[][SVG_MAX_NAME], char **values) {
    static const char *const elements[] = {"svg", "g", "rect", "line", "polyline", "circle", "text", "title"};
    static const char *const numeric[] = {"x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "width", "height",
                                          "font-size", "stroke-width", "opacity", "fill-opacity"};
    int known = 0;
    for (size_t i = 0; i < sizeof elements / sizeof *elements; i++) known |= !strcmp(el, elements[i]);
    if (!known) return svg_fail(r, "element <%s> is not one kvq writes (svg g rect line polyline circle text title)", el);
    if (r->depth == 0 && strcmp(el, "svg")) return svg_fail(r, "the root is <%s>, not <svg>", el);
    int has_ns = 0, has_vb = 0, has_w = 0, has_h = 0;
    for (int i = 0; i < n; i++) {
        const char *v = values[i], *e;
        double x;
        for (size_t k = 0; k < sizeof numeric / sizeof *numeric; k++) {
            if (strcmp(names[i], numeric[k])) continue;
            int is_length = k < 11 && strcmp(names[i], "r");    /* a position or size: "100%" too */
            if (!svg_number(v, &e, &x) || (*e && !(is_length && !strcmp(e, "%"))))
                return svg_fail(r, "<%s %s=\"%.20s\">: not a finite number", el, names[i], v);
            if (x < 0 && (!strcmp(names[i], "width") || !strcmp(names[i], "height") || !strcmp(names[i], "r")))
                return svg_fail(r, "<%s %s=\"%s\">: negative", el, names[i], v);
        }
        if (!strcmp(names[i], "points")) {
            int count = 0;
            for (const char *p = v; *p;) {
                while (*p == ' ' || *p == ',') p++;
                if (!*p) break;
                if (!svg_number(p, &e, &x)) return svg_fail(r, "<%s points>: '%.20s' not a finite number", el, p);
                p = e;
                count++;
            }
            if (count < 4 || count % 2) return svg_fail(r, "<%s points>: %d numbers, not pairs of two or more", el, count);
        }
        if (r->depth == 0) {
            has_ns |= !strcmp(names[i], "xmlns") && !strcmp(v, "http://www.w3.org/2000/svg");
            double w, h;
            int used = -1;
            if (!strcmp(names[i], "viewBox") && sscanf(v, "0 0 %lf %lf%n", &w, &h, &used) == 2 && !v[used] &&
                isfinite(w) && isfinite(h) && w > 0 && h > 0)
                has_vb = 1;
            has_w |= !strcmp(names[i], "width");
            has_h |= !strcmp(names[i], "height");
        }
    }
    if (r->depth == 0 && !(has_ns && has_vb && has_w && has_h))
        return svg_fail(r, "<svg> root without %s", !has_ns ? "xmlns=\"http://www.w3.org/2000/svg\""
                                                     : !has_vb ? "a viewBox \"0 0 W H\" (W, H > 0)"
                                                               : "width and height");
    return 1;
}

/* A start tag (r->s past '<'): its name and attributes, then the SVG rules; an empty-element
 * tag closes at once. */
static int svg_read_start_tag(SvgReader *r) {
    char el[SVG_MAX_NAME], names[SVG_MAX_ATTRS][SVG_MAX_NAME];
    char *values[SVG_MAX_ATTRS];
    int n = 0, ok = svg_read_name(r, el);
    while (ok) {
        const char *before = r->s;
        svg_skip_space(r);
        if (r->s >= r->end) { ok = svg_fail(r, "<%s> not closed", el); break; }
        if (*r->s == '>' || !strncmp(r->s, "/>", 2)) break;
        if (r->s == before) { ok = svg_fail(r, "<%s>: no space before an attribute", el); break; }
        if (n == SVG_MAX_ATTRS) { ok = svg_fail(r, "<%s>: more than %d attributes", el, SVG_MAX_ATTRS); break; }
        if (!(ok = svg_read_name(r, names[n]))) break;
        for (int i = 0; i < n && ok; i++)
            if (!strcmp(names[i], names[n])) ok = svg_fail(r, "<%s>: attribute %s twice", el, names[n]);
        svg_skip_space(r);
        if (ok && *r->s != '=') ok = svg_fail(r, "<%s %s>: '=' expected", el, names[n]);
        if (!ok) break;
        r->s++;
        svg_skip_space(r);
        char quote = *r->s;
        if (quote != '"' && quote != '\'') { ok = svg_fail(r, "<%s %s=>: the value is not quoted", el, names[n]); break; }
        const char *v0 = ++r->s;
        if (!(ok = svg_read_chars(r, quote))) break;
        if (r->s >= r->end) { ok = svg_fail(r, "<%s %s=>: the value is not closed", el, names[n]); break; }
        values[n] = strndup(v0, (size_t)(r->s - v0));
        if (!values[n]) { ok = svg_fail(r, "out of memory"); break; }
        n++;
        r->s++;
    }
    if (ok) ok = svg_check_element(r, el, n, names, values);
    for (int i = 0; i < n; i++) free(values[i]);
    if (!ok) return 0;
    r->elements++;
    if (r->depth == 0 && r->roots++) return svg_fail(r, "a second root element <%s>", el);
    if (*r->s == '/') { r->s += 2; return 1; }
    r->s++;
    if (r->depth == SVG_MAX_DEPTH) return svg_fail(r, "nested deeper than %d", SVG_MAX_DEPTH);
    snprintf(r->open[r->depth++], SVG_MAX_NAME, "%s", el);
    return 1;
}

/* An end tag (r->s past "</"): the name of the element open last. */
static int svg_read_end_tag(SvgReader *r) {
    char el[SVG_MAX_NAME];
    if (!svg_read_name(r, el)) return 0;
    svg_skip_space(r);
    if (*r->s != '>') return svg_fail(r, "</%s: '>' expected", el);
    r->s++;
    if (r->depth == 0) return svg_fail(r, "</%s> closes nothing", el);
    if (strcmp(el, r->open[r->depth - 1])) return svg_fail(r, "</%s> closes <%s>", el, r->open[r->depth - 1]);
    r->depth--;
    return 1;
}

/* 1 when text (len bytes) is well-formed XML and an SVG of kvq's subset, else 0 with why[] set. */
static int svg_check(const char *text, size_t len, char *why, size_t why_len) {
    SvgReader *r = calloc(1, sizeof *r);
    if (!r) { snprintf(why, why_len, "out of memory"); return 0; }
    r->s = r->start = text;
    r->end = text + len;
    int ok = memchr(text, 0, len) ? svg_fail(r, "a NUL byte") : 1;
    if (ok && len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) r->s += 3;   /* a byte order mark */
    while (ok && r->s < r->end) {
        if (*r->s != '<') {
            const char *t = r->s;
            ok = svg_read_chars(r, '<');
            if (ok && r->depth == 0)
                for (; t < r->s && ok; t++)
                    if (!(*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r')) ok = svg_fail(r, "text outside the root element");
        } else if (r->s[1] == '!' || r->s[1] == '?') {
            ok = svg_read_misc(r);
        } else if (r->s[1] == '/') {
            r->s += 2;
            ok = svg_read_end_tag(r);
        } else {
            r->s++;
            ok = svg_read_start_tag(r);
        }
    }
    if (ok && r->depth) ok = svg_fail(r, "<%s> not closed at the end", r->open[r->depth - 1]);
    if (ok && !r->roots) ok = svg_fail(r, "no root element");
    snprintf(why, why_len, "%s", ok ? "" : r->why);
    free(r);
    return ok;
}

#endif
