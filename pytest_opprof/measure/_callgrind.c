/* Callgrind's client requests, for --opprof-measure=instructions.
 *
 * Built only where valgrind's headers are installed (Debian's `valgrind` package
 * ships valgrind/callgrind.h): setup.py marks it optional, so a build without them
 * goes on and the measure is refused with one line saying how to get it. The
 * requests are a few instructions that do nothing outside valgrind.
 *
 * mark() is the timer's mark under this measure: between start() and stop() it
 * asks callgrind to dump the counts of the interval since the previous dump,
 * labelled "opprof <k>"; it returns k (marks outside are numbered, not dumped). An op's instructions are the sum of the intervals between its
 * entry's mark and its exit's (pytest_opprof.measure.callgrind reads them).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <valgrind/callgrind.h>

static long long next_mark = 0;
static int dumping = 0; /* between start() and stop(): marks dump */

/* The label of mark k, "opprof <k>", written by hand: snprintf costs about 450
 * instructions, which the op that a mark ends would count as its own. */
static const char *
label_of(long long k, char *buffer, size_t size)
{
    char *end = buffer + size - 1, *p = end;
    *p = '\0';
    do {
        *--p = (char)('0' + k % 10);
        k /= 10;
    } while (k > 0 && p > buffer + 7);
    p -= 7;
    memcpy(p, "opprof ", 7);
    return p;
}

static PyObject *
cg_mark(PyObject *self, PyObject *unused)
{
    char buffer[40];
    long long k = ++next_mark;
    if (dumping)
        CALLGRIND_DUMP_STATS_AT(label_of(k, buffer, sizeof buffer));
    return PyLong_FromLongLong(k);
}

static PyObject *
cg_start(PyObject *self, PyObject *unused)
{
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_ZERO_STATS;
    dumping = 1;
    Py_RETURN_NONE;
}

static PyObject *
cg_stop(PyObject *self, PyObject *unused)
{
    dumping = 0;
    CALLGRIND_STOP_INSTRUMENTATION;
    Py_RETURN_NONE;
}

static PyObject *
cg_running(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(RUNNING_ON_VALGRIND ? 1 : 0);
}

static PyObject *
cg_last(PyObject *self, PyObject *unused)
{
    return PyLong_FromLongLong(next_mark);
}

static PyMethodDef methods[] = {
    {"mark", cg_mark, METH_NOARGS,
     "Number a mark k; between start() and stop() dump the interval as 'opprof <k>'."},
    {"start", cg_start, METH_NOARGS, "Switch instrumentation and dumps on; zero the counts."},
    {"stop", cg_stop, METH_NOARGS, "Switch dumps and instrumentation off."},
    {"running", cg_running, METH_NOARGS, "Whether this process runs under valgrind."},
    {"last", cg_last, METH_NOARGS, "The last mark taken (0: none yet)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_callgrind",
    "Callgrind client requests (built against valgrind/callgrind.h).", -1, methods,
};

PyMODINIT_FUNC
PyInit__callgrind(void)
{
    return PyModule_Create(&module);
}
