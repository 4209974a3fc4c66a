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
    for (; i < n; i++) {
        unsigned char c = p[i];
        if (in_string) {
            if (escaped) {
                escaped = 0;
            } else if (c == '\\') {
                escaped = 1;
            } else if (c == '"') {
                in_string = 0;
            }
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
        case '}':
        case ']':
            depth--;
            if (depth == 0 && c == '}') {
                last_end = i + 1;
            } else if (depth < 0) {
                array_end = i;
            }
            break;
        default:
            break;
        }
        if (array_end >= 0) break;
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
