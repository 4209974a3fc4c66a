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
 *
 * edited(indptr, src, delay, keep, add_src, add_dst, add_delay, base, t): the times
 * alone of the same edges as a change leaves them, without making its edge list: an
 * edge counts where keep (one byte per edge) is not 0, the added edges (sorted by
 * destination, each from a lower to a higher id) count too, and every delay (float64
 * ns) counts rounded to the nearest integer (ties to even), at least 0. A node none of
 * whose edges counts starts at base[v]. The times equal run's on the edge list the
 * change makes (hta.analysis.whatif.changes.Edits.edges).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
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

/* A delay as the edge list holds it: rounded to the nearest integer, at least 0. */
static inline int64_t counted_delay(double d) {
    int64_t r = (int64_t)llrint(d);
    return r > 0 ? r : 0;
}

static PyObject *edited(PyObject *self, PyObject *args) {
    Py_buffer indptr, src, delay, keep, add_src, add_dst, add_delay, base, t;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*w*", &indptr, &src, &delay, &keep,
                          &add_src, &add_dst, &add_delay, &base, &t)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = base.len / 8;
    Py_ssize_t m = src.len / 8;
    Py_ssize_t a = add_src.len / 8;
    if (base.len != n * 8 || indptr.len != (n + 1) * 8 || src.len != m * 8 ||
        delay.len != src.len || keep.len != m || t.len != base.len ||
        add_src.len != a * 8 || add_dst.len != add_src.len ||
        add_delay.len != add_src.len) {
        PyErr_SetString(PyExc_ValueError,
                        "edited: indptr (n + 1), base, t (n, int64), src (int64), delay "
                        "(float64) and keep (bytes) one per edge, and the added edges' "
                        "src, dst (int64) and delay (float64) of one length");
        goto done;
    }
    const int64_t *ip = (const int64_t *)indptr.buf;
    const int64_t *s = (const int64_t *)src.buf;
    const double *d = (const double *)delay.buf;
    const unsigned char *k = (const unsigned char *)keep.buf;
    const int64_t *as = (const int64_t *)add_src.buf;
    const int64_t *ad = (const int64_t *)add_dst.buf;
    const double *add = (const double *)add_delay.buf;
    const int64_t *b = (const int64_t *)base.buf;
    int64_t *tt = (int64_t *)t.buf;
    if (n > 0 && (ip[0] != 0 || ip[n] != m)) {
        PyErr_SetString(PyExc_ValueError, "edited: indptr must go from 0 to the edge count");
        goto done;
    }
    int bad = 0;
    Py_ssize_t j = 0; /* the next added edge */
    Py_BEGIN_ALLOW_THREADS
    if (a > 0 && (ad[0] < 0 || ad[a - 1] >= n)) {
        bad = 1;
    }
    for (Py_ssize_t v = 0; v < n && !bad; v++) {
        int64_t lo = ip[v], hi = ip[v + 1];
        if (lo > hi || hi > m) {
            bad = 1;
            break;
        }
        int64_t best = 0;
        int any = 0;
        for (int64_t e = lo; e < hi; e++) {
            if (!k[e]) {
                continue;
            }
            int64_t u = s[e];
            if (u < 0 || u >= v) {
                bad = 1;
                break;
            }
            int64_t c = tt[u] + counted_delay(d[e]);
            if (!any || c > best) {
                best = c;
                any = 1;
            }
        }
        for (; j < a && ad[j] == v && !bad; j++) {
            int64_t u = as[j];
            if (u < 0 || u >= v) {
                bad = 1;
                break;
            }
            int64_t c = tt[u] + counted_delay(add[j]);
            if (!any || c > best) {
                best = c;
                any = 1;
            }
        }
        if (j < a && ad[j] < v) {
            bad = 1; /* not sorted by destination */
        }
        tt[v] = any ? best : b[v];
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError,
                        "edited: every edge must go from a lower to a higher node id, the "
                        "added ones sorted by destination");
        goto done;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&indptr);
    PyBuffer_Release(&src);
    PyBuffer_Release(&delay);
    PyBuffer_Release(&keep);
    PyBuffer_Release(&add_src);
    PyBuffer_Release(&add_dst);
    PyBuffer_Release(&add_delay);
    PyBuffer_Release(&base);
    PyBuffer_Release(&t);
    return result;
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, "The earliest-start schedule of a DAG (see the module)."},
    {"edited", edited, METH_VARARGS,
     "The times of the schedule of a DAG's edges as a change leaves them (see the module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_schedule", "Native earliest-start schedule.", -1, methods,
};

PyMODINIT_FUNC PyInit__schedule(void) { return PyModule_Create(&module); }
