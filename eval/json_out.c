/* eval/json_out.c: shared JSON writers for the reports (see eval/json_out.h). */
#include "eval/json_out.h"
#include <math.h>
#include <string.h>

void json_out_quoted(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

void json_out_number(FILE *f, const char *key, double v, int last) {
    if (isfinite(v)) fprintf(f, "  \"%s\": %.17g%s\n", key, v, last ? "" : ",");
    else fprintf(f, "  \"%s\": null%s\n", key, last ? "" : ",");
}

void json_out_string(FILE *f, const char *key, const char *s, int last) {
    fprintf(f, "  \"%s\": ", key);
    json_out_quoted(f, s, strlen(s));
    fprintf(f, "%s\n", last ? "" : ",");
}
