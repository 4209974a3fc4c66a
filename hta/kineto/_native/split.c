/*
 * Event boundaries in a JSON array of objects, whatever its layout (module
 * hta.kineto._split). The pure-Python twin is hta/kineto/split.py; both give the same
 * answer (tests/test_split_layouts.py).
 *
 * split(buffer, start, in_string, escaped, depth) scans buffer[start:] from the given
 * state. depth counts open brackets/braces below the array itself (0 between events).
 * Returns (last_end, array_end, in_string, escaped, depth, scanned):
 *   last_end  - one past the last '}' that closed an event (depth back to 0), -1 if none;
 *   array_end - position of the ']' closing the array (depth -1), -1 if not reached;
 *               the scan stops there;
 *   the state after the scan, and where it stopped.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The bytes that change the state outside strings: '"', '{', '}', '[' and ']'. */
static const unsigned char STRUCTURAL[256] = {
    ['"'] = 1, ['{'] = 1, ['}'] = 1, ['['] = 1, [']'] = 1,
};

/* Eight bytes at a time: does the word hold a byte equal to `byte`? (The classic
 * "has zero byte" test on w ^ (byte repeated).) */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
static inline uint64_t has_byte(uint64_t w, unsigned char byte) {
    uint64_t x = w ^ (ONES * byte);
    return (x - ONES) & ~x & HIGHS;
}

/* The first position at or after i holding a structural byte (or n): long runs of
 * indentation and numbers are skipped a word at a time. */
static inline Py_ssize_t skip_plain(const unsigned char *p, Py_ssize_t i, Py_ssize_t n) {
    while (i + 8 <= n) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (has_byte(w, '"') | has_byte(w, '{') | has_byte(w, '}') | has_byte(w, '[') |
            has_byte(w, ']'))
            break;
        i += 8;
    }
    while (i < n && !STRUCTURAL[p[i]]) i++;
    return i;
}

static PyObject *py_split(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *arg;
    Py_ssize_t start;
    int in_string, escaped;
    long depth;
    if (!PyArg_ParseTuple(args, "Onppl", &arg, &start, &in_string, &escaped, &depth))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len, i = start < 0 ? 0 : start, last_end = -1, array_end = -1;
    Py_BEGIN_ALLOW_THREADS
    while (i < n) {
        if (in_string) {
            /* Jump to the next quote (memchr is vectorised); it closes the string unless
             * an odd run of backslashes, inside this string, comes right before it. */
            Py_ssize_t lo = i;
            if (escaped) {  /* the byte after a backslash that ended the last buffer */
                escaped = 0;
                lo = ++i;
                if (i >= n) break;
            }
            const unsigned char *q = memchr(p + i, '"', (size_t)(n - i));
            Py_ssize_t stop = q ? (Py_ssize_t)(q - p) : n;
            Py_ssize_t b = stop;
            while (b > lo && p[b - 1] == '\\') b--;
            int odd = (int)((stop - b) & 1);
            if (!q) {  /* the string runs past the buffer: carry a pending backslash */
                escaped = odd;
                i = n;
                break;
            }
            i = stop + 1;
            if (!odd) in_string = 0;
            continue;
        }
        unsigned char c = p[i];
        if (!STRUCTURAL[c]) {  /* whitespace, digits, letters, ':' and ',' */
            i = skip_plain(p, i + 1, n);
            continue;
        }
        switch (c) {
        case '"':
            in_string = 1;
            break;
        case '{':
        case '[':
            depth++;
            break;
        default:  /* '}' or ']' */
            depth--;
            if (depth == 0 && c == '}') {
                last_end = i + 1;
            } else if (depth < 0) {
                array_end = i;
            }
            break;
        }
        if (array_end >= 0) break;
        i++;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("nnOOln", last_end, array_end, in_string ? Py_True : Py_False,
                         escaped ? Py_True : Py_False, depth, i);
}

static PyMethodDef methods[] = {
    {"split", py_split, METH_VARARGS,
     "split(buffer, start, in_string, escaped, depth) -> (last_end, array_end, in_string,\n"
     "escaped, depth, scanned): event boundaries of a JSON array in any layout."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_split", "Event boundaries of a JSON array in any layout.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__split(void) { return PyModule_Create(&module); }
