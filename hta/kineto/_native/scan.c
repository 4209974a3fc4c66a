/*
 * Native column builder for Kineto trace events (module hta.kineto._scan).
 *
 * scan(buffer) reads one JSON array of trace events and returns typed columns, one
 * entry per array element, for every field the loader reads (the fields of
 * hta/kineto/structs.py). Strings are interned once per call into a local table.
 *
 * It handles only what it can decode exactly like the Python decoder (msgspec into
 * Event/Args structs, then hta.kineto.decode); for anything else (a value of an
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

#include "scan_fields.h"
#include "scan_intern.h"

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

#include "scan_lex.h"

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
        int next = lex_after_member(S, '}');
        if (next != 1) return next == 2;
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
            int next = lex_after_member(S, ']');
            if (next == 0) return 0;
            if (next == 2) break;
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
        PyErr_SetString(PyExc_RuntimeError, "hta.kineto._scan: key table overflow");
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    /* how many raw-text fields a scan returns: native.py refuses a stale build */
    if (m && PyModule_AddIntConstant(m, "RAW_FIELDS", NSPARSE - FIRST_RAW) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
