/* model/formats/safetensors.c: read (mmap + full header validation) and write the
 * safetensors format.
 *
 * Reading trusts nothing: the header length, the JSON, every dtype, shape and
 * offset are checked, sizes are overflow-checked, tensor byte ranges must lie in
 * the data area and must not overlap, and tensor names must be unique.
 *
 * Alignment: the format does not align the data area (the header length is
 * arbitrary), so Tensor.data may be misaligned for its dtype. Readers must load
 * elements with memcpy (or byte-wise), never by casting to float* etc. (model/model.c copies
 * misaligned weights to an aligned buffer before the kernels cast them).
 * Files written by st_write pad the header so the data area starts at a file
 * offset that is a multiple of 8. */
#include "model/formats/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/formats/json.h"

/* ---------- dtypes ---------- */

static const struct {
    const char *name;
    size_t size;
} DTYPES[DT_COUNT] = {
    [DT_BOOL] = {"BOOL", 1},    [DT_U8] = {"U8", 1},   [DT_I8] = {"I8", 1},
    [DT_F8_E5M2] = {"F8_E5M2", 1}, [DT_F8_E4M3] = {"F8_E4M3", 1},
    [DT_I16] = {"I16", 2},      [DT_U16] = {"U16", 2}, [DT_F16] = {"F16", 2},
    [DT_BF16] = {"BF16", 2},    [DT_I32] = {"I32", 4}, [DT_U32] = {"U32", 4},
    [DT_F32] = {"F32", 4},      [DT_F64] = {"F64", 8}, [DT_I64] = {"I64", 8},
    [DT_U64] = {"U64", 8},
};

size_t dtype_size(DType t) { return (unsigned)t < DT_COUNT ? DTYPES[t].size : 0; }

const char *dtype_name(DType t) { return (unsigned)t < DT_COUNT ? DTYPES[t].name : "?"; }

int dtype_from_name(const char *s, DType *out) {
    for (int i = 0; s && i < DT_COUNT; i++) {
        if (strcmp(s, DTYPES[i].name) == 0) {
            *out = (DType)i;
            return 0;
        }
    }
    return -1;
}

/* ---------- helpers for one-line messages ---------- */

static void format_shape(char *buf, size_t cap, const int64_t *shape, int ndim) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* numel and nbytes of a shape; -1 when a product overflows size_t. */
static int shape_bytes(const int64_t *shape, int ndim, DType dt, size_t *numel, size_t *nbytes) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        uint64_t d = (uint64_t)shape[i];
        if (d > SIZE_MAX || (d != 0 && n > SIZE_MAX / d)) return -1;
        n *= (size_t)d;
    }
    size_t es = dtype_size(dt);
    if (es == 0 || n > SIZE_MAX / es) return -1;
    *numel = n;
    *nbytes = n * es;
    return 0;
}

static char *copy_string(const char *s, size_t n) {
    char *c = malloc(n + 1);
    if (c) {
        memcpy(c, s, n);
        c[n] = '\0';
    }
    return c;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* First repeated string of names[0..n) (sorts a copy: n log n), or NULL.
 * Sets *oom on allocation failure. */
static const char *find_duplicate(const char *const *names, size_t n, int *oom) {
    *oom = 0;
    if (n < 2) return NULL;
    const char **sorted = malloc(n * sizeof *sorted);
    if (!sorted) { *oom = 1; return NULL; }
    memcpy(sorted, names, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_str);
    const char *dup = NULL;
    for (size_t i = 1; i < n && !dup; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0) dup = sorted[i];
    free(sorted);
    return dup;
}

/* ---------- reading ---------- */

typedef struct {
    uint64_t begin, end;
    int index;
} Range;

static int cmp_range(const void *a, const void *b) {
    const Range *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int parse_metadata(SafeTensors *st, const JsonValue *m, Error *err) {
    char nm[72];
    if (m->type != JSON_OBJECT) return error_set(err, "%s: __metadata__ is not an object", st->path);
    if (m->count > (size_t)INT32_MAX) return error_set(err, "%s: too many metadata entries", st->path);
    st->meta_keys = calloc(m->count + 1, sizeof *st->meta_keys);
    st->meta_values = calloc(m->count + 1, sizeof *st->meta_values);
    if (!st->meta_keys || !st->meta_values) return error_set(err, "%s: out of memory", st->path);
    for (size_t i = 0; i < m->count; i++) {
        const JsonValue *v = &m->items[i];
        if (m->key_lens[i] != strlen(m->keys[i]))
            return error_set(err, "%s: metadata key '%s' contains a NUL byte", st->path, error_shown(m->keys[i], nm));
        if (v->type != JSON_STRING)
            return error_set(err, "%s: metadata '%s' is not a string", st->path, error_shown(m->keys[i], nm));
        if (v->string_len != strlen(v->string))
            return error_set(err, "%s: metadata '%s' contains a NUL byte", st->path, error_shown(m->keys[i], nm));
        st->meta_keys[i] = copy_string(m->keys[i], m->key_lens[i]);
        st->meta_values[i] = copy_string(v->string, v->string_len);
        st->n_meta++;
        if (!st->meta_keys[i] || !st->meta_values[i]) return error_set(err, "%s: out of memory", st->path);
    }
    int oom;
    const char *dup = find_duplicate((const char *const *)st->meta_keys, (size_t)st->n_meta, &oom);
    if (oom) return error_set(err, "%s: out of memory", st->path);
    if (dup) return error_set(err, "%s: duplicate metadata key '%s'", st->path, error_shown(dup, nm));
    return 0;
}

static int parse_shape(const SafeTensors *st, const char *nm, const JsonValue *s, Tensor *t, Error *err) {
    if (!s || s->type != JSON_ARRAY)
        return error_set(err, "%s: tensor '%s': missing or non-array \"shape\"", st->path, nm);
    if (s->count > ST_MAX_DIMS)
        return error_set(err, "%s: tensor '%s': shape has %zu dimensions (limit %d)", st->path, nm,
                         s->count, ST_MAX_DIMS);
    for (size_t d = 0; d < s->count; d++) {
        const JsonValue *v = &s->items[d];
        if (v->type != JSON_NUMBER || !v->is_uint || v->uint_value > (uint64_t)INT64_MAX)
            return error_set(err, "%s: tensor '%s': shape[%zu] is not a non-negative integer", st->path,
                             nm, d);
        t->shape[d] = (int64_t)v->uint_value;
    }
    t->ndim = (int)s->count;
    if (shape_bytes(t->shape, t->ndim, t->dtype, &t->numel, &t->nbytes)) {
        char sh[160];
        format_shape(sh, sizeof sh, t->shape, t->ndim);
        return error_set(err, "%s: tensor '%s': shape %s x %s overflows the address space", st->path, nm,
                         sh, dtype_name(t->dtype));
    }
    return 0;
}

/* Validates one header entry into t and r (byte range within the data area). */
static int parse_tensor(const SafeTensors *st, const char *name, const JsonValue *e, uint64_t data_size,
                        Tensor *t, Range *r, Error *err) {
    char nm[72], sh[160];
    error_shown(name, nm);
    if (e->type != JSON_OBJECT) return error_set(err, "%s: tensor '%s': entry is not an object", st->path, nm);
    const JsonValue *dt = json_get(e, "dtype");
    if (!dt || dt->type != JSON_STRING)
        return error_set(err, "%s: tensor '%s': missing or non-string \"dtype\"", st->path, nm);
    if (dtype_from_name(dt->string, &t->dtype)) {
        char dn[72];
        return error_set(err, "%s: tensor '%s': unknown dtype '%s'", st->path, nm, error_shown(dt->string, dn));
    }
    if (parse_shape(st, nm, json_get(e, "shape"), t, err)) return -1;
    const JsonValue *o = json_get(e, "data_offsets");
    if (!o || o->type != JSON_ARRAY || o->count != 2 || o->items[0].type != JSON_NUMBER ||
        !o->items[0].is_uint || o->items[1].type != JSON_NUMBER || !o->items[1].is_uint)
        return error_set(err, "%s: tensor '%s': \"data_offsets\" is not [begin, end] of non-negative integers",
                         st->path, nm);
    r->begin = o->items[0].uint_value;
    r->end = o->items[1].uint_value;
    if (r->begin > r->end)
        return error_set(err, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] are reversed",
                         st->path, nm, r->begin, r->end);
    if (r->end > data_size)
        return error_set(err, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                         "] end past the data area (%" PRIu64 " bytes)", st->path, nm, r->begin, r->end, data_size);
    if (r->end - r->begin != (uint64_t)t->nbytes) {
        format_shape(sh, sizeof sh, t->shape, t->ndim);
        return error_set(err, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                         "] do not match shape %s x %s (%zu bytes)", st->path, nm, r->begin, r->end, sh,
                         dtype_name(t->dtype), t->nbytes);
    }
    t->name = copy_string(name, strlen(name));
    if (!t->name) return error_set(err, "%s: out of memory", st->path);
    return 0;
}

/* Byte ranges sorted by start must each end before the next begins. Empty
 * tensors hold no bytes and cannot overlap anything. */
static int check_overlaps(const SafeTensors *st, Range *r, int n, Error *err) {
    qsort(r, (size_t)n, sizeof *r, cmp_range);
    int prev = -1;
    for (int i = 0; i < n; i++) {
        if (r[i].begin == r[i].end) continue;
        if (prev >= 0 && r[prev].end > r[i].begin) {
            char a[72], b[72];
            return error_set(err, "%s: tensors '%s' [%" PRIu64 ", %" PRIu64 "] and '%s' [%" PRIu64 ", %" PRIu64
                             "] overlap", st->path, error_shown(st->tensors[r[prev].index].name, a), r[prev].begin,
                             r[prev].end, error_shown(st->tensors[r[i].index].name, b), r[i].begin, r[i].end);
        }
        prev = i;
    }
    return 0;
}

static int check_duplicate_names(const SafeTensors *st, Error *err) {
    char nm[72];
    const char **names = malloc(((size_t)st->n_tensors + 1) * sizeof *names);
    if (!names) return error_set(err, "%s: out of memory", st->path);
    for (int i = 0; i < st->n_tensors; i++) names[i] = st->tensors[i].name;
    int oom;
    const char *dup = find_duplicate(names, (size_t)st->n_tensors, &oom);
    int rc = 0;
    if (oom) rc = error_set(err, "%s: out of memory", st->path);
    else if (dup) rc = error_set(err, "%s: duplicate tensor name '%s'", st->path, error_shown(dup, nm));
    free(names);
    return rc;
}

/* Walks the header object: metadata, then every tensor in header order. */
static int parse_entries(SafeTensors *st, const JsonValue *root, const unsigned char *data,
                         uint64_t data_size, Error *err) {
    char nm[72];
    if (root->count > (size_t)INT32_MAX) return error_set(err, "%s: too many tensors", st->path);
    st->tensors = calloc(root->count + 1, sizeof *st->tensors);
    Range *ranges = calloc(root->count + 1, sizeof *ranges);
    if (!st->tensors || !ranges) {
        free(ranges);
        return error_set(err, "%s: out of memory", st->path);
    }
    int rc = 0, seen_meta = 0;
    for (size_t i = 0; i < root->count && rc == 0; i++) {
        const char *key = root->keys[i];
        if (strcmp(key, "__metadata__") == 0 && root->key_lens[i] == 12) {
            rc = seen_meta++ ? error_set(err, "%s: duplicate __metadata__", st->path)
                             : parse_metadata(st, &root->items[i], err);
            continue;
        }
        if (root->key_lens[i] == 0) rc = error_set(err, "%s: empty tensor name", st->path);
        else if (root->key_lens[i] != strlen(key))
            rc = error_set(err, "%s: tensor name '%s' contains a NUL byte", st->path, error_shown(key, nm));
        if (rc) break;
        Tensor *t = &st->tensors[st->n_tensors];
        Range *r = &ranges[st->n_tensors];
        rc = parse_tensor(st, key, &root->items[i], data_size, t, r, err);
        if (rc == 0) {
            t->data = data + r->begin;
            t->offset = r->begin;
            r->index = st->n_tensors++;
        }
    }
    if (rc == 0) rc = check_duplicate_names(st, err);
    if (rc == 0) rc = check_overlaps(st, ranges, st->n_tensors, err);
    free(ranges);
    return rc;
}

/* Validates the whole file image buf[0..size); fills st (path already set). */
static int st_parse(SafeTensors *st, const unsigned char *buf, size_t size, Error *err) {
    if (size < 8)
        return error_set(err, "%s: file is %zu bytes, too short for the 8-byte header length", st->path, size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | buf[i];
    if (n < 2) return error_set(err, "%s: header length %" PRIu64 " is too small", st->path, n);
    if (n > ST_MAX_HEADER)
        return error_set(err, "%s: header length %" PRIu64 " exceeds the limit of %u bytes", st->path, n,
                         ST_MAX_HEADER);
    if (n > size - 8)
        return error_set(err, "%s: header length %" PRIu64 " is past the end of the file (%zu bytes)",
                         st->path, n, size);
    const char *text = (const char *)buf + 8;
    Error jerr = {{0}};
    JsonValue *root = json_parse(text, (size_t)n, &jerr);
    if (!root) return error_set(err, "%s: header is not valid JSON: at header %s", st->path, jerr.msg);
    int rc;
    if (root->type != JSON_OBJECT) rc = error_set(err, "%s: header is not a JSON object", st->path);
    else rc = parse_entries(st, root, buf + 8 + n, (uint64_t)(size - 8 - n), err);
    json_free(root);
    return rc;
}

int st_open_memory(SafeTensors *st, const void *buf, size_t len, const char *name, Error *err) {
    memset(st, 0, sizeof *st);
    st->path = copy_string(name ? name : "<memory>", strlen(name ? name : "<memory>"));
    if (!st->path) return error_set(err, "%s: out of memory", name ? name : "<memory>");
    st->size = len;
    if (st_parse(st, buf, buf ? len : 0, err)) {
        st_close(st);
        return -1;
    }
    return 0;
}

int st_open(SafeTensors *st, const char *path, Error *err) {
    memset(st, 0, sizeof *st);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return error_set(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return error_set(err, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return error_set(err, "%s: not a regular file", path);
    }
    if (sb.st_size < 8 || (uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);   /* an empty file cannot be mapped: report it here */
        return error_set(err, "%s: file is %jd bytes, too short for the 8-byte header length", path,
                         (intmax_t)sb.st_size);
    }
    size_t size = (size_t)sb.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);   /* the mapping keeps the file alive */
    if (map == MAP_FAILED) return error_set(err, "%s: cannot mmap: %s", path, strerror(e));
    st->map = map;
    st->size = size;
    st->path = copy_string(path, strlen(path));
    if (!st->path) {
        st_close(st);
        return error_set(err, "%s: out of memory", path);
    }
    if (st_parse(st, map, size, err)) {
        st_close(st);
        return -1;
    }
    return 0;
}

void st_close(SafeTensors *st) {
    if (!st) return;
    if (st->map) munmap(st->map, st->size);
    for (int i = 0; st->tensors && i < st->n_tensors; i++) free(st->tensors[i].name);
    for (int i = 0; i < st->n_meta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_values[i]);
    }
    free(st->tensors);
    free(st->meta_keys);
    free(st->meta_values);
    free(st->path);
    memset(st, 0, sizeof *st);
}

const Tensor *st_find(const SafeTensors *st, const char *name) {
    for (int i = 0; st && name && i < st->n_tensors; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

const char *st_meta(const SafeTensors *st, const char *key) {
    for (int i = 0; st && key && i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

/* ---------- writing ---------- */

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} Buf;

static void buf_put(Buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (n > SIZE_MAX / 2 - b->len) { b->oom = 1; return; }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) { b->oom = 1; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void buf_str(Buf *b, const char *s) { buf_put(b, s, strlen(s)); }

/* A JSON string literal; s is valid UTF-8 (checked by the caller). */
static void buf_json_string(Buf *b, const char *s) {
    buf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            buf_put(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            buf_put(b, esc, 6);
        } else {
            buf_put(b, s, 1);
        }
    }
    buf_put(b, "\"", 1);
}

static void buf_u64(Buf *b, uint64_t v) {
    char num[24];
    snprintf(num, sizeof num, "%" PRIu64, v);
    buf_str(b, num);
}

/* Checks every tensor and metadata pair; sizes[i] gets tensor i's byte count. */
/* A file's __metadata__ as st_write takes it: n keys and their values. */
typedef struct {
    const char *const *keys, *const *values;
    int n;
} StMeta;

static int check_outputs(const char *path, const StTensorOut *t, int n, const StMeta *meta, size_t *sizes, Error *err) {
    const char *const *mk = meta->keys, *const *mv = meta->values;
    int n_meta = meta->n;
    char nm[72];
    for (int i = 0; i < n_meta; i++)
        if (!mk[i] || !mv[i] || !json_utf8_valid(mk[i], strlen(mk[i])) || !json_utf8_valid(mv[i], strlen(mv[i])))
            return error_set(err, "%s: metadata entry %d is missing or not valid UTF-8", path, i);
    for (int i = 0; i < n; i++) {
        if (!t[i].name || !t[i].name[0] || !json_utf8_valid(t[i].name, strlen(t[i].name)) ||
            strcmp(t[i].name, "__metadata__") == 0)
            return error_set(err, "%s: tensor %d has an empty, reserved or non-UTF-8 name", path, i);
        error_shown(t[i].name, nm);
        if ((unsigned)t[i].dtype >= DT_COUNT || t[i].ndim < 0 || t[i].ndim > ST_MAX_DIMS)
            return error_set(err, "%s: tensor '%s': bad dtype or ndim", path, nm);
        size_t numel;
        for (int d = 0; d < t[i].ndim; d++)
            if (t[i].shape[d] < 0) return error_set(err, "%s: tensor '%s': negative dimension", path, nm);
        if (shape_bytes(t[i].shape, t[i].ndim, t[i].dtype, &numel, &sizes[i]))
            return error_set(err, "%s: tensor '%s': byte count overflows", path, nm);
        if (sizes[i] && !t[i].data) return error_set(err, "%s: tensor '%s': no data", path, nm);
    }
    int oom;
    const char **names = malloc(((size_t)n + 1) * sizeof *names);
    if (!names) return error_set(err, "%s: out of memory", path);
    for (int i = 0; i < n; i++) names[i] = t[i].name;
    const char *dup = find_duplicate(names, (size_t)n, &oom);
    if (!dup && !oom) dup = find_duplicate(mk, (size_t)n_meta, &oom);
    free(names);
    if (oom) return error_set(err, "%s: out of memory", path);
    if (dup) return error_set(err, "%s: duplicate name '%s'", path, error_shown(dup, nm));
    return 0;
}

/* The compact header JSON, padded with spaces to a multiple of 8 bytes. */
static int build_header(const char *path, const StTensorOut *t, int n, const StMeta *meta, const size_t *sizes, Buf *b,
                        Error *err) {
    const char *const *mk = meta->keys, *const *mv = meta->values;
    int n_meta = meta->n;
    buf_str(b, "{");
    if (n_meta > 0) {
        buf_str(b, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            if (i) buf_str(b, ",");
            buf_json_string(b, mk[i]);
            buf_str(b, ":");
            buf_json_string(b, mv[i]);
        }
        buf_str(b, "}");
    }
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        if (i || n_meta > 0) buf_str(b, ",");
        buf_json_string(b, t[i].name);
        buf_str(b, ":{\"dtype\":\"");
        buf_str(b, dtype_name(t[i].dtype));
        buf_str(b, "\",\"shape\":[");
        for (int d = 0; d < t[i].ndim; d++) {
            if (d) buf_str(b, ",");
            buf_u64(b, (uint64_t)t[i].shape[d]);
        }
        buf_str(b, "],\"data_offsets\":[");
        buf_u64(b, offset);
        buf_str(b, ",");
        if (sizes[i] > UINT64_MAX - offset) return error_set(err, "%s: total data size overflows", path);
        offset += sizes[i];
        buf_u64(b, offset);
        buf_str(b, "]}");
    }
    buf_str(b, "}");
    while (b->len % 8) buf_str(b, " ");
    if (b->oom) return error_set(err, "%s: out of memory", path);
    if (b->len > ST_MAX_HEADER) return error_set(err, "%s: header of %zu bytes is too large", path, b->len);
    return 0;
}

static int write_all(int fd, const void *data, size_t n) {
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes the whole file to tmp. Returns 0, or the errno value of the failure. */
static int write_file(const char *tmp, const Buf *hdr, const StTensorOut *t, int n, const size_t *sizes) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return errno;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hdr->len >> (8 * i));
    int bad = write_all(fd, len8, 8) || write_all(fd, hdr->p, hdr->len);
    for (int i = 0; i < n && !bad; i++) bad = write_all(fd, t[i].data, sizes[i]);
    int e = bad ? (errno ? errno : EIO) : 0;
    if (close(fd) != 0 && !e) e = errno;
    return e;
}

int st_write(const char *path, const StTensorOut *tensors, int n_tensors, const char *const *meta_keys,
             const char *const *meta_values, int n_meta, Error *err) {
    if (!path || n_tensors < 0 || n_meta < 0 || (n_tensors && !tensors) || (n_meta && (!meta_keys || !meta_values)))
        return error_set(err, "%s: bad arguments to st_write", path ? path : "(null)");
    size_t tmp_cap = strlen(path) + 32;
    size_t *sizes = calloc((size_t)n_tensors + 1, sizeof *sizes);
    char *tmp = malloc(tmp_cap);
    Buf hdr = {0};
    if (!sizes || !tmp) {
        free(sizes);
        free(tmp);
        return error_set(err, "%s: out of memory", path);
    }
    StMeta meta = {meta_keys, meta_values, n_meta};
    int rc = check_outputs(path, tensors, n_tensors, &meta, sizes, err);
    if (rc == 0) rc = build_header(path, tensors, n_tensors, &meta, sizes, &hdr, err);
    if (rc == 0) {
        snprintf(tmp, tmp_cap, "%s.tmp.%ld", path, (long)getpid());
        int e = write_file(tmp, &hdr, tensors, n_tensors, sizes);
        if (e == 0 && rename(tmp, path) != 0) e = errno;
        if (e != 0) {
            rc = error_set(err, "%s: cannot write: %s", path, strerror(e));
            unlink(tmp);   /* leave nothing behind */
        }
    }
    free(tmp);
    free(hdr.p);
    free(sizes);
    return rc;
}
