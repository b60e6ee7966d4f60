/* The recording hot path in C: op scopes and timed functions.
 *
 * The same API and semantics as _pyscope.py (read that first; it is the
 * reference). What C buys: `with op(...)` calls __enter__/__exit__ without a
 * Python frame, the lists are appended to without bound-method calls, and a
 * decorated function forwards its call by vectorcall, so that with no profiler
 * recording the decorator costs one pointer test.
 *
 * Every recording function holds a reference to the sink while it runs, since
 * mark() may run Python code that ends the iteration. The open ops are a stack
 * of borrowed names: the sink's `names` list holds them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

static PyObject *sink = NULL;           /* the active tuple, or NULL */
static unsigned long owner = 0;         /* the ident of the thread that records */
static PyObject *update_wrapper = NULL; /* functools.update_wrapper */
static PyObject *op_cache = NULL;       /* name -> OpScope, shared with the profiler */
static PyObject *op_make = NULL;        /* builds, checks and caches what is not there */
static PyObject *perf_counter_ns = NULL; /* time.perf_counter_ns */
static int direct_clock = 0;            /* the sink's mark is perf_counter_ns: read it here */
static PyObject **open_ops = NULL;      /* the names of the ops open in `sink`, innermost last */
static unsigned long long untimed = 0;  /* ops entered that this thread did not record */
static PyObject *special_wrap = NULL;   /* _pyscope.special_wrap: coroutines, generators */
static PyObject *late_coroutine = NULL; /* _pyscope.late_coroutine: a call that gave one */
static Py_ssize_t open_len = 0, open_cap = 0;

#ifdef __linux__
#include <time.h>
#endif

/* A mark: the sink's mark(), or on Linux, when that is time.perf_counter_ns, the
 * same clock read without the call (CPython reads CLOCK_MONOTONIC for it there). */
static inline PyObject *
take_mark(PyObject *s)
{
#ifdef __linux__
    if (direct_clock) {
        struct timespec ts;
        if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0)
            return PyLong_FromLongLong((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    }
#endif
    return PyObject_CallNoArgs(PyTuple_GET_ITEM(s, 2));
}
static PyTypeObject TimedType;

/* module.name, a new reference (NULL with an exception set). */
static PyObject *
import_attr(const char *module, const char *name)
{
    PyObject *m = PyImport_ImportModule(module);
    PyObject *attr = m != NULL ? PyObject_GetAttrString(m, name) : NULL;
    Py_XDECREF(m);
    return attr;
}

static inline int
call_hook(PyObject *s, Py_ssize_t index, PyObject *arg)
{
    if (PyTuple_GET_SIZE(s) <= index || PyTuple_GET_ITEM(s, index) == Py_None)
        return 0;
    PyObject *hook = PyTuple_GET_ITEM(s, index);
    PyObject *r = arg != NULL ? PyObject_CallOneArg(hook, arg) : PyObject_CallNoArgs(hook);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* Pushes `name` on the open ops of the active sink (borrowed: `names` holds it). */
static int
push_open(PyObject *s, PyObject *name)
{
    if (s != sink)
        return 0; /* a call that outlived its iteration: nothing to check against */
    if (open_len == open_cap) {
        Py_ssize_t cap = open_cap ? 2 * open_cap : 64;
        PyObject **grown = PyMem_Realloc(open_ops, cap * sizeof(PyObject *));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        open_ops = grown;
        open_cap = cap;
    }
    open_ops[open_len++] = name;
    return 0;
}

/* Pops `name` off the open ops, or raises OpprofError when another op opened
 * after it is still open (their scopes interleave: concurrent tasks). */
static int
pop_open(PyObject *s, PyObject *name)
{
    if (s != sink || open_len == 0)
        return 0; /* opened before this iteration: counted as unbalanced later */
    PyObject *top = open_ops[open_len - 1];
    if (top != name) {
        int same = PyObject_RichCompareBool(top, name, Py_EQ);
        if (same < 0)
            return -1;
        if (!same) { /* the reference's error, raised */
            PyObject *make = import_attr("pytest_opprof.measure._pyscope", "interleaved");
            PyObject *error = make ? PyObject_CallFunctionObjArgs(make, name, top, NULL) : NULL;
            if (error != NULL)
                PyErr_SetObject((PyObject *)Py_TYPE(error), error);
            Py_XDECREF(make);
            Py_XDECREF(error);
            return -1;
        }
    }
    open_len--;
    return 0;
}

static int
record_enter(PyObject *s, PyObject *name)
{
    if (PyList_Append(PyTuple_GET_ITEM(s, 0), name) < 0 || push_open(s, name) < 0)
        return -1;
    PyObject *t = call_hook(s, 4, name) < 0 ? NULL : take_mark(s);
    int rc = t == NULL ? -1 : PyList_Append(PyTuple_GET_ITEM(s, 1), t);
    Py_XDECREF(t);
    if (rc < 0 && s == sink && open_len > 0)
        open_len--; /* the op never opened: its block will not run, nor end */
    return rc;
}

static int
record_exit(PyObject *s, PyObject *name)
{
    if (pop_open(s, name) < 0)
        return -1;
    PyObject *t = take_mark(s);
    if (t == NULL)
        return -1;
    int rc = PyList_Append(PyTuple_GET_ITEM(s, 1), t);
    Py_DECREF(t);
    if (rc < 0 || PyList_Append(PyTuple_GET_ITEM(s, 0), Py_None) < 0)
        return -1;
    return call_hook(s, 5, NULL);
}

/* The sink, if this thread records into it (borrowed), else NULL. */
static inline PyObject *
my_sink(void)
{
    return (sink != NULL && PyThread_get_thread_ident() == owner) ? sink : NULL;
}

/* ---- TimedFunction: what @op(name) returns ---------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *name;
    PyObject *fn;
    PyObject *dict;
    PyObject *weakreflist;
    vectorcallfunc vectorcall;
} TimedObject;

/* The timed callable called through C: each call counts against the recursion limit,
 * as a call through PyObject_Call does. A vectorcall does not count it, and each level of
 * a runaway recursion through a decorated function adds C frames (this function and the
 * evaluator's): under sys.setrecursionlimit(20000) the C stack overflowed before Python's
 * limit was reached (a segmentation fault where the pure-Python path raises
 * RecursionError). */
static inline PyObject *
call_guarded(PyObject *fn, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (Py_EnterRecursiveCall(" while calling an op"))
        return NULL;
    PyObject *result = PyObject_Vectorcall(fn, args, nargsf, kwnames);
    Py_LeaveRecursiveCall();
    return result;
}

static PyObject *
timed_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    TimedObject *self = (TimedObject *)op;
    PyObject *s = my_sink();
    if (s == NULL) {
        untimed++;
        return call_guarded(self->fn, args, nargsf, kwnames);
    }
    Py_INCREF(s);
    if (record_enter(s, self->name) < 0) {
        Py_DECREF(s);
        return NULL;
    }
    PyObject *result = call_guarded(self->fn, args, nargsf, kwnames);
    if (result == NULL) {
        /* like `finally`: close the op, then re-raise the function's exception */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (record_exit(s, self->name) < 0)
            PyErr_Clear(); /* the function's own exception is the one to see */
        PyErr_Restore(type, value, tb);
    }
    else if (record_exit(s, self->name) < 0) {
        Py_CLEAR(result);
    }
    else if (PyCoro_CheckExact(result)) {
        /* the op timed a coroutine's creation, not its work: refused, as the reference */
        if (late_coroutine != NULL
            || (late_coroutine = import_attr("pytest_opprof.measure._pyscope",
                                             "late_coroutine")) != NULL) {
            PyObject *error = PyObject_CallFunctionObjArgs(late_coroutine, self->name,
                                                           self->fn, result, NULL);
            if (error != NULL) {
                PyErr_SetObject((PyObject *)Py_TYPE(error), error);
                Py_DECREF(error);
            }
        }
        Py_CLEAR(result);
    }
    Py_DECREF(s);
    return result;
}

static PyObject *
timed_new(PyObject *name, PyObject *fn)
{
    TimedObject *self = PyObject_GC_New(TimedObject, &TimedType);
    if (self == NULL)
        return NULL;
    self->name = Py_NewRef(name);
    self->fn = Py_NewRef(fn);
    self->dict = NULL;
    self->weakreflist = NULL;
    self->vectorcall = timed_vectorcall;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
timed_traverse(TimedObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->name);
    Py_VISIT(self->fn);
    Py_VISIT(self->dict);
    return 0;
}

static int
timed_clear(TimedObject *self)
{
    Py_CLEAR(self->name);
    Py_CLEAR(self->fn);
    Py_CLEAR(self->dict);
    return 0;
}

static void
timed_dealloc(TimedObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    timed_clear(self);
    PyObject_GC_Del(self);
}

/* Bound like a function: an op decorating a method sees its `self`. */
static PyObject *
timed_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

/* Attributes the wrapper lacks are the wrapped object's
 * (instrument(numpy).add.reduce keeps working). */
static PyObject *
timed_getattro(PyObject *op, PyObject *attr)
{
    PyObject *value = PyObject_GenericGetAttr(op, attr);
    if (value != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return value;
    PyErr_Clear();
    return PyObject_GetAttr(((TimedObject *)op)->fn, attr);
}

static PyObject *
timed_repr(TimedObject *self)
{
    return PyUnicode_FromFormat("<op %R timing %R>", self->name, self->fn);
}

static PyMemberDef timed_members[] = {
    {"_opprof_name", T_OBJECT, offsetof(TimedObject, name), READONLY, "the op's name"},
    {"_opprof_target", T_OBJECT, offsetof(TimedObject, fn), READONLY, "the timed callable"},
    {NULL},
};

static PyGetSetDef timed_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict},
    {NULL},
};

static PyTypeObject TimedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pytest_opprof._cscope.TimedFunction",
    .tp_doc = "A callable timed as a named op of the active profiler.",
    .tp_basicsize = sizeof(TimedObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
                | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(TimedObject, vectorcall),
    .tp_dictoffset = offsetof(TimedObject, dict),
    .tp_weaklistoffset = offsetof(TimedObject, weakreflist),
    .tp_traverse = (traverseproc)timed_traverse,
    .tp_clear = (inquiry)timed_clear,
    .tp_dealloc = (destructor)timed_dealloc,
    .tp_descr_get = timed_descr_get,
    .tp_getattro = timed_getattro,
    .tp_repr = (reprfunc)timed_repr,
    .tp_members = timed_members,
    .tp_getset = timed_getset,
};

/* ---- OpScope: `with op(name):` and `@op(name)` ------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *name;
} ScopeObject;

static PyObject *
scope_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *name;
    static char *kwlist[] = {"name", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:OpScope", kwlist, &name))
        return NULL;
    ScopeObject *self = (ScopeObject *)type->tp_alloc(type, 0);
    if (self != NULL)
        self->name = Py_NewRef(name);
    return (PyObject *)self;
}

static void
scope_dealloc(ScopeObject *self)
{
    Py_CLEAR(self->name);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* record(sink, name) into this thread's sink `s`, held while it runs. */
static inline int
record_in(PyObject *s, int (*record)(PyObject *, PyObject *), PyObject *name)
{
    Py_INCREF(s);
    int rc = record(s, name);
    Py_DECREF(s);
    return rc;
}

static PyObject *
scope_enter(ScopeObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *s = my_sink();
    if (s == NULL)
        untimed++;
    else if (record_in(s, record_enter, self->name) < 0)
        return NULL;
    return Py_NewRef(self);
}

static PyObject *
scope_exit(ScopeObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *s = my_sink();
    if (s != NULL && record_in(s, record_exit, self->name) < 0)
        return NULL;
    Py_RETURN_NONE; /* never swallows the block's exception */
}

static PyObject *
scope_call(ScopeObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *fn;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "op(name) decorates one callable, without keywords");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O:op", &fn))
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "op(%R) decorates a callable, got %R", self->name, fn);
        return NULL;
    }
    /* a coroutine function's body runs when its coroutine is awaited, a generator's on
     * each next(): the reference decides for both (timed awaits, or refused) */
    if (special_wrap == NULL
        && (special_wrap = import_attr("pytest_opprof.measure._pyscope", "special_wrap")) == NULL)
        return NULL;
    PyObject *special = PyObject_CallFunctionObjArgs(special_wrap, (PyObject *)self, fn, NULL);
    if (special == NULL || special != Py_None)
        return special;
    Py_DECREF(special);
    PyObject *timed = timed_new(self->name, fn);
    if (timed == NULL)
        return NULL;
    PyObject *r = PyObject_CallFunctionObjArgs(update_wrapper, timed, fn, NULL);
    if (r == NULL) {
        Py_DECREF(timed);
        return NULL;
    }
    Py_DECREF(r);
    return timed;
}

static PyObject *
scope_repr(ScopeObject *self)
{
    return PyUnicode_FromFormat("op(%R)", self->name);
}

static PyMethodDef scope_methods[] = {
    {"__enter__", (PyCFunction)scope_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))scope_exit, METH_FASTCALL, NULL},
    {NULL},
};

static PyMemberDef scope_members[] = {
    {"name", T_OBJECT, offsetof(ScopeObject, name), READONLY, "the op's name"},
    {NULL},
};

static PyTypeObject ScopeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pytest_opprof._cscope.OpScope",
    .tp_doc = "A named op: `with op(\"conv2d\"): ...` or `@op(\"conv2d\")`.",
    .tp_basicsize = sizeof(ScopeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = scope_new,
    .tp_dealloc = (destructor)scope_dealloc,
    .tp_call = (ternaryfunc)scope_call,
    .tp_repr = (reprfunc)scope_repr,
    .tp_methods = scope_methods,
    .tp_members = scope_members,
};

/* new_scope(name): the scope op(name) hands out, made faster for `with`.
 *
 * `with` looks __enter__ and __exit__ up on the type, and binds each to the
 * object: two allocations per block. Here each name gets its own subclass whose
 * __enter__ and __exit__ are already bound to its one instance, and a bound
 * builtin method is not a descriptor, so `with` finds them ready to call (-40 ns
 * a block). Scopes live as long as the process (op() caches them), so the cycle
 * class -> bound method -> scope -> class costs nothing. */
static PyObject *
new_scope(PyObject *module, PyObject *name)
{
    PyObject *cls = PyObject_CallFunction((PyObject *)&PyType_Type, "s(O){s:(),s:s}", "OpScope",
                                          (PyObject *)&ScopeType, "__slots__", "__module__",
                                          "pytest_opprof._cscope");
    if (cls == NULL)
        return NULL;
    PyObject *scope = PyObject_CallOneArg(cls, name);
    PyObject *enter = NULL, *exit = NULL;
    if (scope == NULL
        || (enter = PyObject_GetAttrString(scope, "__enter__")) == NULL
        || (exit = PyObject_GetAttrString(scope, "__exit__")) == NULL
        || PyObject_SetAttrString(cls, "__enter__", enter) < 0
        || PyObject_SetAttrString(cls, "__exit__", exit) < 0) {
        Py_CLEAR(scope);
    }
    Py_XDECREF(enter);
    Py_XDECREF(exit);
    Py_DECREF(cls);
    return scope;
}

/* ---- op(name): one dict lookup when the name was seen before --------- */

static PyObject *
op(PyObject *module, PyObject *name)
{
    if (op_make == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "op() is used before configure_op()");
        return NULL;
    }
    if (PyUnicode_CheckExact(name)) {
        PyObject *scope = PyDict_GetItemWithError(op_cache, name); /* borrowed */
        if (scope != NULL)
            return Py_NewRef(scope);
        if (PyErr_Occurred())
            return NULL;
    }
    return PyObject_CallOneArg(op_make, name);
}

static PyObject *
configure_op(PyObject *module, PyObject *args)
{
    PyObject *cache, *make;
    if (!PyArg_ParseTuple(args, "O!O:configure_op", &PyDict_Type, &cache, &make))
        return NULL;
    Py_XSETREF(op_cache, Py_NewRef(cache));
    Py_XSETREF(op_make, Py_NewRef(make));
    Py_RETURN_NONE;
}

/* ---- the sink --------------------------------------------------------- */

static PyObject *
set_sink(PyObject *module, PyObject *arg)
{
    if (arg == Py_None) {
        Py_CLEAR(sink);
        open_len = 0;
        direct_clock = 0;
        Py_RETURN_NONE;
    }
    if (!PyTuple_CheckExact(arg) || PyTuple_GET_SIZE(arg) < 3
        || !PyList_CheckExact(PyTuple_GET_ITEM(arg, 0))
        || !PyList_CheckExact(PyTuple_GET_ITEM(arg, 1))
        || !PyCallable_Check(PyTuple_GET_ITEM(arg, 2))) {
        PyErr_SetString(PyExc_TypeError, "set_sink takes None or (names, marks, mark, ...)");
        return NULL;
    }
    owner = PyThread_get_thread_ident();
    Py_XSETREF(sink, Py_NewRef(arg));
    open_len = 0;
    direct_clock = PyTuple_GET_ITEM(arg, 2) == perf_counter_ns;
    Py_RETURN_NONE;
}

static PyObject *
get_sink(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(sink != NULL ? sink : Py_None);
}

static PyObject *
untimed_calls(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromUnsignedLongLong(untimed);
}

static PyObject *
recording_here(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(my_sink() != NULL);
}

static PyMethodDef module_methods[] = {
    {"set_sink", set_sink, METH_O, "Start recording into a sink tuple, or stop (None)."},
    {"get_sink", get_sink, METH_NOARGS, "The active sink tuple, or None."},
    {"recording_here", recording_here, METH_NOARGS,
     "Whether ops called from this thread are recorded now."},
    {"untimed_calls", untimed_calls, METH_NOARGS,
     "How many ops were entered, in this process so far, where no sink recorded them."},
    {"new_scope", new_scope, METH_O, "The OpScope that op(name) hands out for a new name."},
    {"configure_op", configure_op, METH_VARARGS,
     "op() looks names up in `cache` and calls `make(name)` for the rest."},
    {"op", op, METH_O,
     "op(name)\n--\n\n"
     "Time a block or a function as a named op of the active profiler.\n\n"
     "``with pytest_opprof.op(\"conv2d\"): ...``, ``@pytest_opprof.op(\"conv2d\")``, or\n"
     "bare ``@pytest_opprof.op`` (named after the function). The op object of a name\n"
     "is made once and reused; with no profiler recording it does nothing."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pytest_opprof._cscope",
    .m_doc = "The recording hot path in C (see _pyscope.py for the reference).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__cscope(void)
{
    if (PyType_Ready(&ScopeType) < 0 || PyType_Ready(&TimedType) < 0)
        return NULL;
    if ((update_wrapper = import_attr("functools", "update_wrapper")) == NULL
        || (perf_counter_ns = import_attr("time", "perf_counter_ns")) == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "OpScope", (PyObject *)&ScopeType) < 0
        || PyModule_AddObjectRef(m, "TimedFunction", (PyObject *)&TimedType) < 0
        || PyModule_AddObjectRef(m, "FORWARDS_ATTRIBUTES", Py_True) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
