/*
 * Native earliest-start schedule (module hta.analysis.whatif._schedule), the compiled
 * form of hta.analysis.whatif.schedule.schedule: one pass over the nodes in id order.
 *
 * run(indptr, src, delay, base, t, via, root): the edges sorted by destination
 * (node v's incoming edges are src[indptr[v]:indptr[v + 1]], in the order of their
 * source ids), every edge from a lower to a higher node id. indptr (n + 1), src, delay
 * and base are int64 arrays; t, via and root (int64, n each) are filled in place:
 * a node without predecessor starts at base[v] (via -1, root itself); another at the
 * largest t[src] + delay of its edges, ties going to the later edge, with via that edge
 * and root the root of its source. An empty via or root is not filled (a caller that
 * reads the times alone spares their memory).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static PyObject *run(PyObject *self, PyObject *args) {
    Py_buffer indptr, src, delay, base, t, via, root;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*w*w*", &indptr, &src, &delay, &base, &t, &via,
                          &root)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = base.len / 8;
    Py_ssize_t m = src.len / 8;
    int want_via = via.len != 0, want_root = root.len != 0;
    if (base.len != n * 8 || indptr.len != (n + 1) * 8 || src.len != m * 8 ||
        delay.len != src.len || t.len != base.len || (want_via && via.len != base.len) ||
        (want_root && root.len != base.len)) {
        PyErr_SetString(PyExc_ValueError,
                        "run: indptr (n + 1), base, t, via, root (n, or via and root empty) "
                        "and src, delay (one per edge) must be int64 arrays of matching "
                        "sizes");
        goto done;
    }
    const int64_t *ip = (const int64_t *)indptr.buf;
    const int64_t *s = (const int64_t *)src.buf;
    const int64_t *d = (const int64_t *)delay.buf;
    const int64_t *b = (const int64_t *)base.buf;
    int64_t *tt = (int64_t *)t.buf;
    int64_t *vv = (int64_t *)via.buf;
    int64_t *rr = (int64_t *)root.buf;
    if (n > 0 && (ip[0] != 0 || ip[n] != m)) {
        PyErr_SetString(PyExc_ValueError, "run: indptr must go from 0 to the edge count");
        goto done;
    }
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t v = 0; v < n && !bad; v++) {
        int64_t lo = ip[v], hi = ip[v + 1];
        if (hi == lo) {
            tt[v] = b[v];
            if (want_via) {
                vv[v] = -1;
            }
            if (want_root) {
                rr[v] = v;
            }
            continue;
        }
        if (lo > hi || hi > m) {
            bad = 1;
            break;
        }
        int64_t best = 0, chosen = -1;
        for (int64_t e = lo; e < hi; e++) {
            int64_t u = s[e];
            if (u < 0 || u >= v) {
                bad = 1;
                break;
            }
            int64_t c = tt[u] + d[e];
            if (chosen < 0 || c >= best) {
                best = c;
                chosen = e;
            }
        }
        if (bad) {
            break;
        }
        tt[v] = best;
        if (want_via) {
            vv[v] = chosen;
        }
        if (want_root) {
            rr[v] = rr[s[chosen]];
        }
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError,
                        "run: every edge must go from a lower to a higher node id");
        goto done;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&indptr);
    PyBuffer_Release(&src);
    PyBuffer_Release(&delay);
    PyBuffer_Release(&base);
    PyBuffer_Release(&t);
    PyBuffer_Release(&via);
    PyBuffer_Release(&root);
    return result;
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, "The earliest-start schedule of a DAG (see the module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_schedule", "Native earliest-start schedule.", -1, methods,
};

PyMODINIT_FUNC PyInit__schedule(void) { return PyModule_Create(&module); }
