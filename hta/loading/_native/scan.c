/*
 * Native column builder for Kineto trace events (module hta.loading._scan).
 *
 * scan(buffer) reads one JSON array of trace events and returns typed columns, one
 * entry per array element, for every field the loader reads (the fields of
 * hta/loading/structs.py). Strings are interned once per call into a local table.
 *
 * It handles only what it can decode exactly like the Python decoder (msgspec into
 * Event/Args structs, then hta.loading.decode); for anything else (a value of an
 * unexpected type, a duplicate key, an exponent in "ts", malformed JSON, invalid UTF-8
 * in a kept string...) it returns None and the caller decodes the chunk in Python, so
 * every warning and error message stays the Python decoder's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- field table ------------------------------------------------------------------ */

enum kind { K_STR, K_SSTR, K_ID, K_INT, K_NUM, K_TS, K_RAW, K_DIMS, K_ARGS, K_DSTR,
            K_DSSTR, K_DUR };

typedef struct {
    const char *key;
    int kind;
    int slot;
} FieldDef;

/* Dense columns (one entry per event): symbols ph, cat, name; pid, tid; ts; dur. */
enum { S_PH, S_CAT, S_NAME, NSYM };
/* Sparse columns (row, value) for fields only some events carry; the order is the one
 * of SPARSE in native.py. Symbols, then ints, then floats, then dims, then raw text. */
enum {
    S_BP, S_S, S_COLL, S_DTYPE, S_PGNAME, S_PGDESC, S_META, S_LABELS,
    I_ID, I_EXT, I_EXTL, I_CORR, I_STREAM, I_DEVICE, I_CBID, I_CID, I_GRAPH, I_SEQNO,
    I_FWD, I_WSTREAM, I_WCORR, I_ADDR, I_DEVTYPE, I_DEVID, I_SORT,
    N_REGS, N_SHMEM, N_BPSM, N_WPSM, N_OCC, N_BYTES, N_SIZE, N_BW, N_INMSG,
    N_OUTMSG, N_GROUP, N_SEQ, N_MEMBYTES, N_TOTALLOC, N_TOTRES,
    D_GRID, D_BLOCK,
    R_PGRANKS, R_DIMS, R_DIMSL, R_ITYPE, NSPARSE
};
#define FIRST_RAW R_PGRANKS
#define N_DUR (-1) /* the dense dur column */

static int sparse_width(int slot) {
    if (slot < I_ID) return 4;
    if (slot < D_GRID) return 8;
    if (slot < R_PGRANKS) return 24;
    return 16; /* raw text: offset and length */
}

static const FieldDef TOP[] = {
    {"ph", K_DSSTR, S_PH}, {"cat", K_DSTR, S_CAT}, {"name", K_DSTR, S_NAME},
    {"pid", K_ID, 0}, {"tid", K_ID, 1}, {"ts", K_TS, 0}, {"dur", K_DUR, 0},
    {"id", K_INT, I_ID}, {"bp", K_SSTR, S_BP}, {"s", K_SSTR, S_S}, {"args", K_ARGS, 0},
};
#define NTOP ((int)(sizeof(TOP) / sizeof(TOP[0])))

static const FieldDef ARGS[] = {
    {"External id", K_INT, I_EXT}, {"external id", K_INT, I_EXTL},
    {"correlation", K_INT, I_CORR}, {"stream", K_INT, I_STREAM},
    {"device", K_INT, I_DEVICE}, {"cbid", K_INT, I_CBID}, {"cid", K_INT, I_CID},
    {"graph id", K_INT, I_GRAPH}, {"grid", K_DIMS, D_GRID}, {"block", K_DIMS, D_BLOCK},
    {"registers per thread", K_NUM, N_REGS}, {"shared memory", K_NUM, N_SHMEM},
    {"blocks per SM", K_NUM, N_BPSM}, {"warps per SM", K_NUM, N_WPSM},
    {"est. achieved occupancy %", K_NUM, N_OCC}, {"bytes", K_NUM, N_BYTES},
    {"size", K_NUM, N_SIZE}, {"memory bandwidth (GB/s)", K_NUM, N_BW},
    {"Collective name", K_STR, S_COLL}, {"dtype", K_STR, S_DTYPE},
    {"In msg nelems", K_NUM, N_INMSG}, {"Out msg nelems", K_NUM, N_OUTMSG},
    {"Group size", K_NUM, N_GROUP}, {"Process Group Name", K_STR, S_PGNAME},
    {"Process Group Description", K_STR, S_PGDESC},
    {"Process Group Ranks", K_RAW, R_PGRANKS}, {"Seq", K_NUM, N_SEQ},
    {"Input Dims", K_RAW, R_DIMS}, {"Input dims", K_RAW, R_DIMSL},
    {"Input type", K_RAW, R_ITYPE}, {"Sequence number", K_INT, I_SEQNO},
    {"Fwd thread id", K_INT, I_FWD}, {"wait_on_stream", K_INT, I_WSTREAM},
    {"wait_on_cuda_event_record_corr_id", K_INT, I_WCORR}, {"Addr", K_INT, I_ADDR},
    {"Bytes", K_NUM, N_MEMBYTES}, {"Total Allocated", K_NUM, N_TOTALLOC},
    {"Total Reserved", K_NUM, N_TOTRES}, {"Device Type", K_INT, I_DEVTYPE},
    {"Device Id", K_INT, I_DEVID}, {"name", K_STR, S_META}, {"labels", K_STR, S_LABELS},
    {"sort_index", K_INT, I_SORT},
};
#define NARGS ((int)(sizeof(ARGS) / sizeof(ARGS[0])))

static size_t TOP_LEN[NTOP];
static size_t ARGS_LEN[NARGS];

/* ---- string interning ------------------------------------------------------------- */

typedef struct {
    const char *s;
    Py_ssize_t len;
    uint64_t h;
    int owned;
} Str;

typedef struct {
    Str *items;
    Py_ssize_t n, cap;
    int32_t *slots;
    Py_ssize_t nslots;
} Interner;

static uint64_t hash_bytes(const char *s, Py_ssize_t len) {
    /* 8 bytes at a time: kernel names are long and every event has one */
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)len;
    Py_ssize_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, (size_t)(len - i));
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

static int interner_grow(Interner *in) {
    Py_ssize_t nslots = in->nslots ? in->nslots * 2 : 1024;
    int32_t *slots = malloc(sizeof(int32_t) * nslots);
    if (!slots) return 0;
    for (Py_ssize_t i = 0; i < nslots; i++) slots[i] = -1;
    for (Py_ssize_t k = 0; k < in->n; k++) {
        Py_ssize_t j = (Py_ssize_t)(in->items[k].h & (uint64_t)(nslots - 1));
        while (slots[j] >= 0) j = (j + 1) & (nslots - 1);
        slots[j] = (int32_t)k;
    }
    free(in->slots);
    in->slots = slots;
    in->nslots = nslots;
    return 1;
}

/* Returns the id of s (taking ownership of it when owned), or -1 on memory error. */
static int32_t intern(Interner *in, const char *s, Py_ssize_t len, int owned) {
    if ((in->n + 1) * 2 > in->nslots && !interner_grow(in)) return -1;
    uint64_t h = hash_bytes(s, len);
    Py_ssize_t j = (Py_ssize_t)(h & (uint64_t)(in->nslots - 1));
    while (in->slots[j] >= 0) {
        Str *it = &in->items[in->slots[j]];
        if (it->h == h && it->len == len && memcmp(it->s, s, len) == 0) {
            if (owned) free((void *)s);
            return in->slots[j];
        }
        j = (j + 1) & (in->nslots - 1);
    }
    if (in->n == in->cap) {
        Py_ssize_t cap = in->cap ? in->cap * 2 : 256;
        Str *items = realloc(in->items, sizeof(Str) * cap);
        if (!items) return -1;
        in->items = items;
        in->cap = cap;
    }
    in->items[in->n] = (Str){s, len, h, owned};
    in->slots[j] = (int32_t)in->n;
    return (int32_t)in->n++;
}

static void interner_free(Interner *in) {
    for (Py_ssize_t k = 0; k < in->n; k++)
        if (in->items[k].owned) free((void *)in->items[k].s);
    free(in->items);
    free(in->slots);
}

/* ---- scanner state ---------------------------------------------------------------- */

typedef struct {
    int32_t *rows;
    unsigned char *vals;
    Py_ssize_t n, cap;
} Sparse;

typedef struct {
    const unsigned char *p, *end, *base;
    Interner in;
    Py_ssize_t n, cap;
    int32_t *sym[NSYM];
    int64_t *idv[2];
    int32_t *ids[2];
    int64_t *ts;
    uint8_t *tsp;
    double *dur;
    Sparse sp[NSPARSE];
} Scan;

/* Room for one more value of a sparse column, recorded for row; NULL on memory error. */
static void *sparse_add(Scan *S, int slot, Py_ssize_t row) {
    Sparse *sp = &S->sp[slot];
    int width = sparse_width(slot);
    if (sp->n == sp->cap) {
        Py_ssize_t cap = sp->cap ? sp->cap * 2 : 256;
        int32_t *rows = realloc(sp->rows, sizeof(int32_t) * (size_t)cap);
        if (!rows) return NULL;
        sp->rows = rows;
        unsigned char *vals = realloc(sp->vals, (size_t)width * (size_t)cap);
        if (!vals) return NULL;
        sp->vals = vals;
        sp->cap = cap;
    }
    sp->rows[sp->n] = (int32_t)row;
    return sp->vals + (size_t)width * (size_t)sp->n++;
}

#define GROW(ptr, type)                                                             \
    do {                                                                            \
        void *np_ = realloc((ptr), sizeof(type) * (size_t)cap);                     \
        if (!np_) return 0;                                                         \
        (ptr) = np_;                                                                \
    } while (0)

static int scan_grow(Scan *S) {
    Py_ssize_t cap = S->cap ? S->cap * 2 : 4096;
    for (int i = 0; i < NSYM; i++) GROW(S->sym[i], int32_t);
    for (int i = 0; i < 2; i++) {
        GROW(S->idv[i], int64_t);
        GROW(S->ids[i], int32_t);
    }
    GROW(S->ts, int64_t);
    GROW(S->tsp, uint8_t);
    GROW(S->dur, double);
    S->cap = cap;
    return 1;
}

static void scan_free(Scan *S) {
    interner_free(&S->in);
    for (int i = 0; i < NSYM; i++) free(S->sym[i]);
    for (int i = 0; i < 2; i++) {
        free(S->idv[i]);
        free(S->ids[i]);
    }
    free(S->ts);
    free(S->tsp);
    free(S->dur);
    for (int i = 0; i < NSPARSE; i++) {
        free(S->sp[i].rows);
        free(S->sp[i].vals);
    }
}

/* ---- JSON lexing ------------------------------------------------------------------ */

static inline void ws(Scan *S) {
    while (S->p < S->end &&
           (*S->p == ' ' || *S->p == '\n' || *S->p == '\r' || *S->p == '\t'))
        S->p++;
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex4(const unsigned char *q, const unsigned char *end, unsigned *out) {
    if (end - q < 4) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(q[i]);
        if (h < 0) return 0;
        v = v * 16 + (unsigned)h;
    }
    *out = v;
    return 1;
}

/* Decode the escapes of a string body [a, b) into a new malloc'd buffer. */
static char *unescape(const unsigned char *a, const unsigned char *b, Py_ssize_t *len) {
    char *out = malloc((size_t)(b - a) + 1);
    if (!out) return NULL;
    Py_ssize_t k = 0;
    while (a < b) {
        if (*a != '\\') {
            out[k++] = (char)*a++;
            continue;
        }
        a++;
        unsigned char c = *a++;
        switch (c) {
        case '"': out[k++] = '"'; break;
        case '\\': out[k++] = '\\'; break;
        case '/': out[k++] = '/'; break;
        case 'b': out[k++] = '\b'; break;
        case 'f': out[k++] = '\f'; break;
        case 'n': out[k++] = '\n'; break;
        case 'r': out[k++] = '\r'; break;
        case 't': out[k++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (!read_hex4(a, b, &cp)) goto fail;
            a += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (b - a < 6 || a[0] != '\\' || a[1] != 'u' || !read_hex4(a + 2, b, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    goto fail;
                a += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                goto fail;
            }
            if (cp < 0x80) {
                out[k++] = (char)cp;
            } else if (cp < 0x800) {
                out[k++] = (char)(0xC0 | (cp >> 6));
                out[k++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                out[k++] = (char)(0xE0 | (cp >> 12));
                out[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[k++] = (char)(0x80 | (cp & 0x3F));
            } else {
                out[k++] = (char)(0xF0 | (cp >> 18));
                out[k++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                out[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[k++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: goto fail;
        }
    }
    *len = k;
    return out;
fail:
    free(out);
    return NULL;
}

/* Scan a string starting at '"'. Sets body bounds and whether it holds escapes. */
static int lex_string(Scan *S, const unsigned char **a, const unsigned char **b, int *esc) {
    if (S->p >= S->end || *S->p != '"') return 0;
    const unsigned char *q = S->p + 1, *end = S->end;
    int e = 0;
    /* skip 8 plain bytes at a time: no quote, backslash or control character */
    while (end - q >= 8) {
        uint64_t w;
        memcpy(&w, q, 8);
        const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
        uint64_t quote = w ^ (ones * '"'), bslash = w ^ (ones * '\\');
        uint64_t special = ((quote - ones) & ~quote) | ((bslash - ones) & ~bslash) |
                           ((w - ones * 0x20) & ~w);
        if (special & highs) break;
        q += 8;
    }
    while (q < end) {
        unsigned char c = *q;
        if (c == '"') break;
        if (c < 0x20) return 0;
        if (c == '\\') {
            e = 1;
            if (q + 1 >= end) return 0;
            unsigned char d = q[1];
            if (d == 'u') {
                unsigned v;
                if (!read_hex4(q + 2, end, &v)) return 0;
                q += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", d) || d == 0) return 0;
            q += 2;
            continue;
        }
        q++;
    }
    if (q >= end) return 0;
    *a = S->p + 1;
    *b = q;
    *esc = e;
    S->p = q + 1;
    return 1;
}

/* A string value interned; returns its local id or -1 (decline). */
static int32_t read_symbol(Scan *S) {
    const unsigned char *a, *b;
    int esc;
    if (!lex_string(S, &a, &b, &esc)) return -1;
    if (!esc) return intern(&S->in, (const char *)a, b - a, 0);
    Py_ssize_t len;
    char *s = unescape(a, b, &len);
    if (!s) return -1;
    return intern(&S->in, s, len, 1);
}

typedef struct {
    const unsigned char *a;
    Py_ssize_t len;
    int is_int;  /* no fraction, no exponent */
    int has_exp;
    int neg;
    Py_ssize_t int_digits;
} Num;

static int lex_number(Scan *S, Num *num) {
    const unsigned char *q = S->p, *end = S->end;
    num->a = q;
    num->neg = 0;
    num->is_int = 1;
    num->has_exp = 0;
    if (q < end && *q == '-') {
        num->neg = 1;
        q++;
    }
    const unsigned char *d0 = q;
    if (q >= end || *q < '0' || *q > '9') return 0;
    if (*q == '0') {
        q++;
    } else {
        while (q < end && *q >= '0' && *q <= '9') q++;
    }
    num->int_digits = q - d0;
    if (q < end && *q == '.') {
        num->is_int = 0;
        q++;
        if (q >= end || *q < '0' || *q > '9') return 0;
        while (q < end && *q >= '0' && *q <= '9') q++;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        num->is_int = 0;
        num->has_exp = 1;
        q++;
        if (q < end && (*q == '+' || *q == '-')) q++;
        if (q >= end || *q < '0' || *q > '9') return 0;
        while (q < end && *q >= '0' && *q <= '9') q++;
    }
    num->len = q - num->a;
    S->p = q;
    return 1;
}

static int lex_literal(Scan *S, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(S->end - S->p) < n || memcmp(S->p, lit, n) != 0) return 0;
    S->p += n;
    return 1;
}

static int skip_value(Scan *S, int depth) {
    if (depth > 64) return 0;
    ws(S);
    if (S->p >= S->end) return 0;
    unsigned char c = *S->p;
    if (c == '"') {
        const unsigned char *a, *b;
        int esc;
        return lex_string(S, &a, &b, &esc);
    }
    if (c == '{' || c == '[') {
        unsigned char close = c == '{' ? '}' : ']';
        S->p++;
        ws(S);
        if (S->p < S->end && *S->p == close) {
            S->p++;
            return 1;
        }
        for (;;) {
            if (c == '{') {
                const unsigned char *a, *b;
                int esc;
                ws(S);
                if (!lex_string(S, &a, &b, &esc)) return 0;
                ws(S);
                if (S->p >= S->end || *S->p != ':') return 0;
                S->p++;
            }
            if (!skip_value(S, depth + 1)) return 0;
            ws(S);
            if (S->p >= S->end) return 0;
            if (*S->p == ',') {
                S->p++;
                continue;
            }
            if (*S->p == close) {
                S->p++;
                return 1;
            }
            return 0;
        }
    }
    if (c == 't') return lex_literal(S, "true");
    if (c == 'f') return lex_literal(S, "false");
    if (c == 'n') return lex_literal(S, "null");
    Num num;
    return lex_number(S, &num);
}

/* An integer token within +-INT64_MAX. */
static int num_to_int(const Num *num, int64_t *out) {
    if (!num->is_int) return 0;
    const unsigned char *q = num->a + num->neg;
    uint64_t v = 0;
    for (Py_ssize_t i = 0; i < num->int_digits; i++) {
        unsigned d = q[i] - '0';
        if (v > (uint64_t)(INT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = num->neg ? -(int64_t)v : (int64_t)v;
    return 1;
}

/* IntLike: an integer or null (-1); anything else declines. */
static int read_int(Scan *S, int64_t *out) {
    if (S->p < S->end && *S->p == 'n') {
        *out = -1;
        return lex_literal(S, "null");
    }
    Num num;
    return lex_number(S, &num) && num_to_int(&num, out);
}

/* NumLike: a number or null (NaN). */
static int read_num(Scan *S, double *out) {
    if (S->p < S->end && *S->p == 'n') {
        *out = NAN;
        return lex_literal(S, "null");
    }
    Num num;
    if (!lex_number(S, &num)) return 0;
    int64_t iv;
    if (num.is_int && num.int_digits <= 15 && num_to_int(&num, &iv)) {
        *out = (double)iv;
        return 1;
    }
    char buf[64];
    if (num.len >= (Py_ssize_t)sizeof(buf)) return 0;
    memcpy(buf, num.a, (size_t)num.len);
    buf[num.len] = 0;
    char *endp;
    *out = strtod(buf, &endp);
    return endp == buf + num.len;
}

/* ts: microseconds as a decimal, to exact integer nanoseconds (see timeparse.py). */
static int read_ts(Scan *S, int64_t *out) {
    Num num;
    if (S->p >= S->end || *S->p == 'n' || !lex_number(S, &num) || num.has_exp) return 0;
    /* below 2**52 us the float64 route of timeparse.py is exact too: same result */
    if (num.int_digits > 16) return 0;
    const unsigned char *q = num.a + num.neg;
    int64_t us = 0;
    for (Py_ssize_t i = 0; i < num.int_digits; i++) us = us * 10 + (q[i] - '0');
    if (us >= (1LL << 52)) return 0;
    int64_t frac = 0;
    if (!num.is_int) {
        const unsigned char *f = q + num.int_digits + 1;
        const unsigned char *fend = num.a + num.len;
        int scale = 100;
        for (; f < fend && scale > 0; f++, scale /= 10) frac += (int64_t)(*f - '0') * scale;
    }
    int64_t ns = us * 1000 + frac;
    *out = num.neg ? -ns : ns;
    return 1;
}

/* grid/block: an array of integers (first three kept, -1 padded) or a string. */
static int read_dims(Scan *S, int64_t *out) {
    out[0] = out[1] = out[2] = -1;
    if (S->p < S->end && *S->p == '"') {
        const unsigned char *a, *b;
        int esc;
        return lex_string(S, &a, &b, &esc);
    }
    if (S->p >= S->end || *S->p != '[') return 0;
    S->p++;
    ws(S);
    if (S->p < S->end && *S->p == ']') {
        S->p++;
        return 1;
    }
    for (int k = 0;; k++) {
        ws(S);
        Num num;
        int64_t v;
        if (!lex_number(S, &num) || !num_to_int(&num, &v)) return 0;
        if (k < 3) out[k] = v;
        ws(S);
        if (S->p >= S->end) return 0;
        if (*S->p == ',') {
            S->p++;
            continue;
        }
        if (*S->p == ']') {
            S->p++;
            return 1;
        }
        return 0;
    }
}

/* Known keys by (length, first byte, last byte): up to KEY_WAYS candidates a bucket. */
#define KEY_BUCKETS 512
#define KEY_WAYS 4
typedef struct {
    int8_t idx[KEY_BUCKETS][KEY_WAYS];
} KeyTable;
static KeyTable TOP_KEYS, ARGS_KEYS;

static inline unsigned key_bucket(const unsigned char *a, size_t len) {
    return (unsigned)(len * 131u + a[0] * 31u + a[len - 1]) & (KEY_BUCKETS - 1);
}

static int key_table_init(KeyTable *t, const FieldDef *defs, int count) {
    memset(t->idx, -1, sizeof(t->idx));
    for (int i = 0; i < count; i++) {
        unsigned b = key_bucket((const unsigned char *)defs[i].key, strlen(defs[i].key));
        int w = 0;
        while (w < KEY_WAYS && t->idx[b][w] >= 0) w++;
        if (w == KEY_WAYS) return 0;
        t->idx[b][w] = (int8_t)i;
    }
    return 1;
}

static inline int match_key(const KeyTable *t, const FieldDef *defs, const size_t *lens,
                            const unsigned char *a, Py_ssize_t len) {
    if (len == 0) return -1;
    const int8_t *cand = t->idx[key_bucket(a, (size_t)len)];
    for (int w = 0; w < KEY_WAYS && cand[w] >= 0; w++) {
        int i = cand[w];
        if (lens[i] == (size_t)len && memcmp(defs[i].key, a, (size_t)len) == 0) return i;
    }
    return -1;
}

static int read_field(Scan *S, const FieldDef *f, Py_ssize_t row);

static int read_object(Scan *S, const KeyTable *keys, const FieldDef *defs,
                       const size_t *lens, Py_ssize_t row) {
    uint64_t seen = 0;
    if (S->p >= S->end || *S->p != '{') return 0;
    S->p++;
    ws(S);
    if (S->p < S->end && *S->p == '}') {
        S->p++;
        return 1;
    }
    for (;;) {
        const unsigned char *a, *b;
        int esc;
        ws(S);
        if (!lex_string(S, &a, &b, &esc) || esc) return 0;
        ws(S);
        if (S->p >= S->end || *S->p != ':') return 0;
        S->p++;
        ws(S);
        int k = match_key(keys, defs, lens, a, b - a);
        if (k < 0) {
            if (!skip_value(S, 1)) return 0;
        } else {
            if (seen & (1ULL << k)) return 0; /* duplicate key */
            seen |= 1ULL << k;
            if (!read_field(S, &defs[k], row)) return 0;
        }
        ws(S);
        if (S->p >= S->end) return 0;
        if (*S->p == ',') {
            S->p++;
            continue;
        }
        if (*S->p == '}') {
            S->p++;
            return 1;
        }
        return 0;
    }
}

static int read_field(Scan *S, const FieldDef *f, Py_ssize_t row) {
    void *v;
    switch (f->kind) {
    /* null is "" as a symbol but "None" where Python calls str(): strings decline it */
    case K_DSTR:
    case K_DSSTR: {
        int32_t id = read_symbol(S);
        if (id < 0) return 0;
        S->sym[f->slot][row] = id;
        return 1;
    }
    case K_STR:
    case K_SSTR: {
        int32_t id = read_symbol(S);
        if (id < 0 || !(v = sparse_add(S, f->slot, row))) return 0;
        memcpy(v, &id, 4);
        return 1;
    }
    case K_DUR:
        return read_num(S, &S->dur[row]);
    case K_ID:
        if (S->p < S->end && *S->p == '"') {
            int32_t id = read_symbol(S);
            if (id < 0) return 0;
            S->ids[f->slot][row] = id;
            S->idv[f->slot][row] = 0;
            return 1;
        }
        if (S->p < S->end && *S->p == 'n') return 0; /* Python names it "None" */
        return read_int(S, &S->idv[f->slot][row]);
    case K_INT: {
        int64_t x;
        if (!read_int(S, &x) || !(v = sparse_add(S, f->slot, row))) return 0;
        memcpy(v, &x, 8);
        return 1;
    }
    case K_NUM: {
        double x;
        if (!read_num(S, &x) || !(v = sparse_add(S, f->slot, row))) return 0;
        memcpy(v, &x, 8);
        return 1;
    }
    case K_TS:
        S->tsp[row] = 1;
        return read_ts(S, &S->ts[row]);
    case K_RAW: {
        const unsigned char *a = S->p;
        if (!skip_value(S, 1) || !(v = sparse_add(S, f->slot, row))) return 0;
        int64_t span[2] = {a - S->base, S->p - a};
        memcpy(v, span, 16);
        return 1;
    }
    case K_DIMS: {
        int64_t d[3];
        if (!read_dims(S, d) || !(v = sparse_add(S, f->slot, row))) return 0;
        memcpy(v, d, 24);
        return 1;
    }
    case K_ARGS:
        return read_object(S, &ARGS_KEYS, ARGS, ARGS_LEN, row);
    }
    return 0;
}

static int read_event(Scan *S) {
    if (S->n >= INT32_MAX - 1) return 0; /* rows are int32 */
    if (S->n == S->cap && !scan_grow(S)) return 0;
    Py_ssize_t r = S->n;
    for (int i = 0; i < NSYM; i++) S->sym[i][r] = 0; /* local id 0 is "" */
    for (int i = 0; i < 2; i++) {
        S->idv[i][r] = -1;
        S->ids[i][r] = -1;
    }
    S->ts[r] = 0;
    S->tsp[r] = 0;
    S->dur[r] = NAN;
    if (!read_object(S, &TOP_KEYS, TOP, TOP_LEN, r)) return 0;
    S->n++;
    return 1;
}

/* Events separated by commas with no enclosing brackets (a piece of traceEvents). */
static int scan_bare(Scan *S) {
    ws(S);
    if (S->p == S->end) return 1;
    for (;;) {
        if (!read_event(S)) return 0;
        ws(S);
        if (S->p == S->end) return 1;
        if (*S->p != ',') return 0;
        S->p++;
        ws(S);
    }
}

static int scan_array(Scan *S) {
    ws(S);
    if (S->p >= S->end || *S->p != '[') return 0;
    S->p++;
    ws(S);
    if (S->p < S->end && *S->p == ']') {
        S->p++;
    } else {
        for (;;) {
            ws(S);
            if (!read_event(S)) return 0;
            ws(S);
            if (S->p >= S->end) return 0;
            if (*S->p == ',') {
                S->p++;
                continue;
            }
            if (*S->p == ']') {
                S->p++;
                break;
            }
            return 0;
        }
    }
    ws(S);
    return S->p == S->end;
}

/* ---- Python entry point ----------------------------------------------------------- */

static PyObject *bytes_of(const void *data, Py_ssize_t nbytes) {
    return PyBytes_FromStringAndSize((const char *)data, nbytes);
}

static PyObject *build_result(Scan *S) {
    Py_ssize_t n = S->n;
    PyObject *strings = NULL, *sym = NULL, *ids = NULL, *ints = NULL, *raws = NULL,
             *res = NULL;
    strings = PyList_New(S->in.n);
    if (!strings) goto done;
    for (Py_ssize_t k = 0; k < S->in.n; k++) {
        PyObject *s = PyUnicode_DecodeUTF8(S->in.items[k].s, S->in.items[k].len, "strict");
        if (!s) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                Py_DECREF(strings);
                Py_RETURN_NONE;
            }
            goto done;
        }
        PyList_SET_ITEM(strings, k, s);
    }
#define TUPLE_OF(var, count, expr)                                                  \
    var = PyTuple_New(count);                                                       \
    if (!var) goto done;                                                            \
    for (int i = 0; i < (count); i++) {                                             \
        PyObject *o_ = (expr);                                                      \
        if (!o_) goto done;                                                         \
        PyTuple_SET_ITEM(var, i, o_);                                               \
    }
    TUPLE_OF(sym, NSYM, bytes_of(S->sym[i], n * 4));
    TUPLE_OF(ids, 4, bytes_of(i < 2 ? (void *)S->idv[i] : (void *)S->ids[i - 2],
                              n * (i < 2 ? 8 : 4)));
    /* sparse columns: (rows, values) as bytes */
    TUPLE_OF(ints, FIRST_RAW, Py_BuildValue(
        "(NN)", bytes_of(S->sp[i].rows, S->sp[i].n * 4),
        bytes_of(S->sp[i].vals, S->sp[i].n * sparse_width(i))));
    /* raw text: one list per field, None where absent */
    raws = PyTuple_New(NSPARSE - FIRST_RAW);
    if (!raws) goto done;
    for (int i = FIRST_RAW; i < NSPARSE; i++) {
        PyObject *lst = PyList_New(n);
        if (!lst) goto done;
        PyTuple_SET_ITEM(raws, i - FIRST_RAW, lst);
        for (Py_ssize_t r = 0; r < n; r++) {
            Py_INCREF(Py_None);
            PyList_SET_ITEM(lst, r, Py_None);
        }
        const Sparse *sp = &S->sp[i];
        for (Py_ssize_t k = 0; k < sp->n; k++) {
            int64_t span[2];
            memcpy(span, sp->vals + 16 * k, 16);
            PyObject *o = PyUnicode_DecodeUTF8((const char *)S->base + span[0], span[1],
                                               "replace");
            if (!o) goto done;
            PyList_SetItem(lst, sp->rows[k], o);
        }
    }
    /* "N" hands the new bytes objects over to the tuple */
    res = Py_BuildValue("(nOOOONNN)", n, strings, sym, ids, ints,
                        bytes_of(S->ts, n * 8), bytes_of(S->tsp, n), bytes_of(S->dur, n * 8));
    if (res) {
        PyObject *full = PyTuple_Pack(2, res, raws);
        Py_DECREF(res);
        res = full;
    }
done:
    Py_XDECREF(strings);
    Py_XDECREF(sym);
    Py_XDECREF(ids);
    Py_XDECREF(ints);
    Py_XDECREF(raws);
    return res;
}

static PyObject *py_scan(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *arg;
    int bare = 0;
    if (!PyArg_ParseTuple(args, "O|p", &arg, &bare)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    Scan S;
    memset(&S, 0, sizeof(S));
    S.base = S.p = (const unsigned char *)view.buf;
    S.end = S.p + view.len;
    PyObject *res = NULL;
    int ok;
    if (intern(&S.in, "", 0, 0) != 0) {
        PyErr_NoMemory();
        goto out;
    }
    Py_BEGIN_ALLOW_THREADS
    ok = bare ? scan_bare(&S) : scan_array(&S);
    Py_END_ALLOW_THREADS
    if (!ok) {
        res = Py_None;
        Py_INCREF(res);
    } else {
        res = build_result(&S);
    }
out:
    scan_free(&S);
    PyBuffer_Release(&view);
    return res;
}

static PyMethodDef methods[] = {
    {"scan", py_scan, METH_VARARGS,
     "scan(buffer, bare=False) -> columns of a JSON array of trace events (bare: the\n"
     "events separated by commas, without brackets), or None to decline."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scan", "Native column builder for Kineto trace events.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__scan(void) {
    for (int i = 0; i < NTOP; i++) TOP_LEN[i] = strlen(TOP[i].key);
    for (int i = 0; i < NARGS; i++) ARGS_LEN[i] = strlen(ARGS[i].key);
    if (!key_table_init(&TOP_KEYS, TOP, NTOP) || !key_table_init(&ARGS_KEYS, ARGS, NARGS)) {
        PyErr_SetString(PyExc_RuntimeError, "hta.loading._scan: key table overflow");
        return NULL;
    }
    return PyModule_Create(&module);
}
