/*
 * Native call-stack walk (module hta.model._stack), the compiled form of the
 * per-event walk that hta.model.links.stack_positions computes.
 *
 * walk(ts, end, first, parent, depth): events sorted by (thread, start, -end); ts and
 * end are int64 arrays, first a uint8/bool array marking each thread's first event;
 * parent (int64) and depth (int32) are filled in place with, for each position, the
 * position of the event on top of the stack after popping every event that ended at
 * or before its start (-1 when the stack is empty), and the stack's size.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

static PyObject *walk(PyObject *self, PyObject *args) {
    Py_buffer ts, end, first, parent, depth;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*", &ts, &end, &first, &parent, &depth)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t m = ts.len / 8;
    if (ts.len != m * 8 || end.len != ts.len || first.len != m || parent.len != m * 8 ||
        depth.len != m * 4) {
        PyErr_SetString(PyExc_ValueError,
                        "walk: ts, end (int64), first (uint8), parent (int64) and depth "
                        "(int32) must hold the same number of events");
        goto done;
    }
    int64_t *stack_end = (int64_t *)malloc((size_t)(m > 0 ? m : 1) * sizeof(int64_t));
    int64_t *stack_pos = (int64_t *)malloc((size_t)(m > 0 ? m : 1) * sizeof(int64_t));
    if (stack_end == NULL || stack_pos == NULL) {
        free(stack_end);
        free(stack_pos);
        PyErr_NoMemory();
        goto done;
    }
    const int64_t *t = (const int64_t *)ts.buf;
    const int64_t *e = (const int64_t *)end.buf;
    const uint8_t *f = (const uint8_t *)first.buf;
    int64_t *par = (int64_t *)parent.buf;
    int32_t *dep = (int32_t *)depth.buf;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t top = 0;
    for (Py_ssize_t p = 0; p < m; p++) {
        if (f[p]) {
            top = 0;
        }
        int64_t start = t[p];
        while (top > 0 && stack_end[top - 1] <= start) {
            top--;
        }
        par[p] = top > 0 ? stack_pos[top - 1] : -1;
        dep[p] = (int32_t)top;
        stack_end[top] = e[p];
        stack_pos[top] = p;
        top++;
    }
    Py_END_ALLOW_THREADS
    free(stack_end);
    free(stack_pos);
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&ts);
    PyBuffer_Release(&end);
    PyBuffer_Release(&first);
    PyBuffer_Release(&parent);
    PyBuffer_Release(&depth);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "The call-stack walk over sorted events (see the module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_stack", "Native call-stack walk.", -1, methods,
};

PyMODINIT_FUNC PyInit__stack(void) { return PyModule_Create(&module); }
