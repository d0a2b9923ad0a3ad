/* A jitted function's cached call, in C.

   ``Dispatcher`` is JitFunction's base type (api.py). Its call does what a cached call
   must: the call's key, the entry under it in the function's ``_fast`` dict, one tick of
   its ``_hits`` counter, ``entry.finish(entry.run(*args))``. Any other call (keywords, an
   argument the key does not hold, a signature not yet compiled, an open profile, a GPU
   asked for) is JitFunction's ``_call(args, kwargs, False)``. In Python (api.py's
   ``_PythonDispatcher``, used where this module could not be built) the same steps cost
   about 1 us for four arguments, most of a small program's call: building the key from
   each array's ``shape`` and ``dtype`` costs 0.2 us an argument. Here the key is one
   bytes object read straight off the arrays' structs.

   Per argument, the key holds one 64-bit tag and, for an array, its extents:
     an ndarray (exactly; subclasses go the general way)  tag = type number, byte order
                                                          and ndim; then ndim extents
     a Python float (exactly: a weakly typed scalar)      tag = FLOAT_TAG
   Any other argument (an int, a NumPy scalar, a list...) or an array whose dtype is not
   a plain number or bool (a datetime's unit, a structured dtype's fields: things the
   type number does not tell) gives None, and the call takes the general path. For the
   dtypes accepted, the type number and whether the bytes are swapped decide dtype
   equality, so two calls with one key have equal (shape, dtype) pairs: the key never
   joins what the Python key would keep apart. (It may keep apart what that one joins,
   ``long`` and ``longlong`` of one size: a second entry, not a wrong one.) */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#define MAX_ARGS 32
#define FLOAT_TAG ((long long)-1)

static int plain_number(int type_num)
{
    return PyTypeNum_ISBOOL(type_num) || PyTypeNum_ISINTEGER(type_num) ||
           PyTypeNum_ISFLOAT(type_num) || PyTypeNum_ISCOMPLEX(type_num);
}

static PyObject *fast_key(PyObject *Py_UNUSED(module), PyObject *args)
{
    long long words[MAX_ARGS * (1 + NPY_MAXDIMS)];
    Py_ssize_t n = 0, nargs;

    if (!PyTuple_CheckExact(args)) {
        PyErr_SetString(PyExc_TypeError, "fast_key takes a tuple");
        return NULL;
    }
    nargs = PyTuple_GET_SIZE(args);
    if (nargs > MAX_ARGS)
        Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        if (PyArray_CheckExact(a)) {
            PyArrayObject *arr = (PyArrayObject *)a;
            PyArray_Descr *descr = PyArray_DESCR(arr);
            int nd = PyArray_NDIM(arr);
            npy_intp *dims = PyArray_DIMS(arr);
            if (!plain_number(descr->type_num))
                Py_RETURN_NONE;
            words[n++] = ((long long)descr->type_num << 16) |
                         ((long long)!PyArray_ISNBO(descr->byteorder) << 8) | nd;
            for (int d = 0; d < nd; d++)
                words[n++] = (long long)dims[d];
        }
        else if (PyFloat_CheckExact(a)) {
            words[n++] = FLOAT_TAG;
        }
        else {
            Py_RETURN_NONE;
        }
    }
    return PyBytes_FromStringAndSize((const char *)words, n * (Py_ssize_t)sizeof(long long));
}

/* What allows the fast path, set once by api.py (configure): the open profiles (a list:
   a profiled call takes the general path) and tracejit.targets' namespace (its
   ``gpu_requested``: once a GPU was asked for, a call must ask where to run). */
static PyObject *profiles = NULL;
static PyObject *targets_ns = NULL;
static PyObject *str_run, *str_finish, *str_call, *str_gpu_requested;

static PyObject *configure(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *p, *ns;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &p, &PyDict_Type, &ns))
        return NULL;
    Py_XSETREF(profiles, Py_NewRef(p));
    Py_XSETREF(targets_ns, Py_NewRef(ns));
    Py_RETURN_NONE;
}

static int fast_allowed(void)
{
    PyObject *gpu;
    if (profiles == NULL || PyList_GET_SIZE(profiles) != 0)
        return 0;
    gpu = PyDict_GetItemWithError(targets_ns, str_gpu_requested); /* borrowed */
    return gpu == Py_False;
}

typedef struct {
    PyObject_HEAD
    PyObject *fast; /* the cached entries by fast key */
    PyObject *hits; /* an itertools.count */
} Dispatcher;

static PyObject *cached_call(PyObject *entry, PyObject *args)
{
    PyObject *run, *out, *finish, *result;
    run = PyObject_GetAttr(entry, str_run);
    if (run == NULL)
        return NULL;
    out = PyObject_Call(run, args, NULL);
    Py_DECREF(run);
    if (out == NULL)
        return NULL;
    finish = PyObject_GetAttr(entry, str_finish);
    if (finish == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    result = PyObject_CallOneArg(finish, out);
    Py_DECREF(finish);
    Py_DECREF(out);
    return result;
}

static PyObject *dispatcher_call(PyObject *op, PyObject *args, PyObject *kwargs)
{
    Dispatcher *self = (Dispatcher *)op;
    PyObject *result;
    int no_kwargs = kwargs == NULL || PyDict_GET_SIZE(kwargs) == 0;
    if (no_kwargs && self->fast != NULL && PyDict_CheckExact(self->fast) && fast_allowed()) {
        PyObject *key = fast_key(NULL, args), *entry;
        if (key == NULL)
            return NULL;
        entry = key == Py_None ? NULL : PyDict_GetItemWithError(self->fast, key);
        Py_DECREF(key);
        if (entry != NULL) {
            PyObject *tick;
            Py_INCREF(entry); /* (borrowed from the dict, which the call may change) */
            tick = self->hits ? PyIter_Next(self->hits) : NULL;
            Py_XDECREF(tick);
            result = PyErr_Occurred() ? NULL : cached_call(entry, args);
            Py_DECREF(entry);
            return result;
        }
        if (PyErr_Occurred())
            return NULL;
    }
    if (no_kwargs) {
        PyObject *empty = PyDict_New();
        if (empty == NULL)
            return NULL;
        result = PyObject_CallMethodObjArgs(op, str_call, args, empty, Py_False, NULL);
        Py_DECREF(empty);
        return result;
    }
    return PyObject_CallMethodObjArgs(op, str_call, args, kwargs, Py_False, NULL);
}

static int dispatcher_traverse(PyObject *op, visitproc visit, void *arg)
{
    Dispatcher *self = (Dispatcher *)op;
    Py_VISIT(self->fast);
    Py_VISIT(self->hits);
    return 0;
}

static int dispatcher_clear(PyObject *op)
{
    Dispatcher *self = (Dispatcher *)op;
    Py_CLEAR(self->fast);
    Py_CLEAR(self->hits);
    return 0;
}

static void dispatcher_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    dispatcher_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyMemberDef dispatcher_members[] = {
    {"_fast", T_OBJECT_EX, offsetof(Dispatcher, fast), 0,
     "the cached entries by fast key (JitFunction sets it)"},
    {"_hits", T_OBJECT_EX, offsetof(Dispatcher, hits), 0,
     "the cached-call counter, an itertools.count (JitFunction sets it)"},
    {NULL},
};

static PyTypeObject DispatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracejit._dispatch.Dispatcher",
    .tp_doc = "The cached call of a jitted function, in C: JitFunction's base.",
    .tp_basicsize = sizeof(Dispatcher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_call = dispatcher_call,
    .tp_traverse = dispatcher_traverse,
    .tp_clear = dispatcher_clear,
    .tp_dealloc = dispatcher_dealloc,
    .tp_members = dispatcher_members,
};

static PyMethodDef methods[] = {
    {"fast_key", fast_key, METH_O,
     "fast_key(args: tuple) -> bytes | None: the cached call's key of positional ndarrays "
     "and Python floats; None for any other call."},
    {"configure", configure, METH_VARARGS,
     "configure(profiles: list, targets_namespace: dict): what allows the fast path."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dispatch",
    "A jitted function's cached call, in C (see _dispatch.c).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__dispatch(void)
{
    PyObject *m;
    import_array();
    str_run = PyUnicode_InternFromString("run");
    str_finish = PyUnicode_InternFromString("finish");
    str_call = PyUnicode_InternFromString("_call");
    str_gpu_requested = PyUnicode_InternFromString("gpu_requested");
    if (!str_run || !str_finish || !str_call || !str_gpu_requested)
        return NULL;
    if (PyType_Ready(&DispatcherType) < 0)
        return NULL;
    m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Dispatcher", (PyObject *)&DispatcherType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
