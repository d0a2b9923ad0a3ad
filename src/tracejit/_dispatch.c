/* A jitted function's cached call, in C.

   ``Dispatcher`` is JitFunction's base type (api.py). Its call does what a cached call
   must: the call's key, the entry under it in the function's ``_fast`` dict, one tick of
   its ``_hits`` counter, ``entry.finish(entry.run(*inputs))``. Any other call (keywords,
   an argument the key does not hold, a signature not yet compiled, an open profile, a GPU
   asked for) is JitFunction's ``_call(args, kwargs, False)``. In Python (dispatch.py's
   ``PythonDispatcher``, used where this module could not be built) the same steps cost
   about 1 us for four arguments, most of a small program's call: building the key from
   each array's ``shape`` and ``dtype`` costs 0.2 us an argument. Here the key is one
   bytes object read straight off the arrays' structs.

   Per positional argument the key holds a 64-bit tag, then what the tag says follows:
     an ndarray (exactly; subclasses go the general way)  type number, byte order, ndim;
                                                          then its extents
     a Python float (a weakly typed scalar)               FLOAT
     None                                                 NONE
     a Python int or bool                                 INT or BOOL; where the function
                                                          needs it as a value (``valued``,
                                                          per position), INT_VALUE or
                                                          BOOL_VALUE, then the value
     a str (a static value)                               STR, its length, its UTF-8 bytes
   Anything else (a NumPy scalar, a list, an int beyond int64, a keyword argument), or an array whose dtype is not a plain number or bool (a datetime's
   unit, a structured dtype's fields: what the type number does not tell), gives None, and
   the call takes the general path. For the dtypes accepted, the type number and whether
   the bytes are swapped decide dtype equality, so two calls with one key are calls the
   Python key (``dispatch.python_fast_key``, ``JitFunction._simple_key``) also joins: one
   signature. (It may keep apart what those join, ``long`` and ``longlong`` of one size: a
   second entry, not a wrong one.) Values (None, strs, valued ints) are no runner inputs:
   the runner gets the other arguments. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#define MAX_ARGS 32
#define MAX_WORDS (MAX_ARGS * (1 + NPY_MAXDIMS))
#define MAX_STR 256 /* longer strs take the general path */
enum { FLOAT = -1, NONE = -2, INT = -3, BOOL = -4, INT_VALUE = -5, BOOL_VALUE = -6, STR = -7 };

static int plain_number(int type_num)
{
    return PyTypeNum_ISBOOL(type_num) || PyTypeNum_ISINTEGER(type_num) ||
           PyTypeNum_ISFLOAT(type_num) || PyTypeNum_ISCOMPLEX(type_num);
}

/* Argument ``a``'s words at ``words[*n]``; 0 where the key holds no such argument (no
   room left counts), -1 with an exception set. ``*value``: it is passed by value, no
   runner input. */
static int key_words(PyObject *a, int valued, long long *words, Py_ssize_t *n, int *value)
{
    Py_ssize_t room = MAX_WORDS - *n;
    *value = 0;
    if (PyArray_CheckExact(a)) {
        PyArrayObject *arr = (PyArrayObject *)a;
        PyArray_Descr *descr = PyArray_DESCR(arr);
        int nd = PyArray_NDIM(arr);
        npy_intp *dims = PyArray_DIMS(arr);
        if (!plain_number(descr->type_num) || room < 1 + nd)
            return 0;
        words[(*n)++] = ((long long)descr->type_num << 16) |
                        ((long long)!PyArray_ISNBO(descr->byteorder) << 8) | nd;
        for (int d = 0; d < nd; d++)
            words[(*n)++] = (long long)dims[d];
        return 1;
    }
    if (room < 2)
        return 0;
    if (PyFloat_CheckExact(a)) {
        words[(*n)++] = FLOAT;
        return 1;
    }
    if (a == Py_None) {
        words[(*n)++] = NONE;
        *value = 1;
        return 1;
    }
    if (PyBool_Check(a) || PyLong_CheckExact(a)) {
        int is_bool = PyBool_Check(a), overflow = 0;
        long long v;
        if (valued < 0)
            return 0; /* (a position without a parameter's name) */
        v = PyLong_AsLongLongAndOverflow(a, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (overflow) /* (beyond int64: passed by value, api._leaf_key) */
            return 0;
        if (!valued) {
            words[(*n)++] = is_bool ? BOOL : INT;
            return 1;
        }
        words[(*n)++] = is_bool ? BOOL_VALUE : INT_VALUE;
        words[(*n)++] = v;
        *value = 1;
        return 1;
    }
    if (PyUnicode_CheckExact(a)) {
        Py_ssize_t size, fit;
        const char *utf8 = PyUnicode_AsUTF8AndSize(a, &size);
        if (utf8 == NULL) { /* (a lone surrogate: the general path says what it is) */
            PyErr_Clear();
            return 0;
        }
        fit = (size + 7) / 8;
        if (size > MAX_STR || room < 2 + fit)
            return 0;
        words[*n + 1 + fit] = 0; /* (the last word's padding; the length's, if empty) */
        words[*n] = STR;
        words[*n + 1] = size;
        memcpy(&words[*n + 2], utf8, (size_t)size);
        *n += 2 + fit;
        *value = 1;
        return 1;
    }
    return 0;
}

/* The key of ``args``, a tuple (None where the key holds no such call), and in
   ``*values`` how many of them are passed by value. ``valued``: per position, whether the
   function needs an int there as a value (a bytes object; positions past its end have no
   parameter's name: an int there takes the general path). */
static PyObject *build_key(PyObject *args, PyObject *valued, Py_ssize_t *values)
{
    long long words[MAX_WORDS];
    Py_ssize_t n = 0, nargs = PyTuple_GET_SIZE(args), known = PyBytes_GET_SIZE(valued);
    const char *flags = PyBytes_AS_STRING(valued);
    *values = 0;
    if (nargs > MAX_ARGS)
        Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        int value, found = key_words(PyTuple_GET_ITEM(args, i), i < known ? flags[i] != 0 : -1,
                                     words, &n, &value);
        if (found < 0)
            return NULL;
        if (!found)
            Py_RETURN_NONE;
        *values += value;
    }
    return PyBytes_FromStringAndSize((const char *)words, n * (Py_ssize_t)sizeof(long long));
}

static PyObject *fast_key(PyObject *Py_UNUSED(module), PyObject *call)
{
    PyObject *args, *valued;
    Py_ssize_t values;
    if (!PyArg_ParseTuple(call, "O!O!", &PyTuple_Type, &args, &PyBytes_Type, &valued))
        return NULL;
    return build_key(args, valued, &values);
}

/* The runner's inputs among ``args``: all but the values (see key_words). */
static PyObject *runner_inputs(PyObject *args, PyObject *valued, Py_ssize_t values)
{
    Py_ssize_t nargs = PyTuple_GET_SIZE(args), known = PyBytes_GET_SIZE(valued), k = 0;
    const char *flags = PyBytes_AS_STRING(valued);
    PyObject *inputs = PyTuple_New(nargs - values);
    if (inputs == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        if (a == Py_None || PyUnicode_CheckExact(a) ||
            ((PyBool_Check(a) || PyLong_CheckExact(a)) && i < known && flags[i]))
            continue;
        PyTuple_SET_ITEM(inputs, k++, Py_NewRef(a));
    }
    return inputs;
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
    PyObject *valued; /* per position, whether an int there is needed as a value (bytes) */
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
    if (no_kwargs && self->fast != NULL && PyDict_CheckExact(self->fast) &&
        self->valued != NULL && PyBytes_CheckExact(self->valued) && fast_allowed()) {
        Py_ssize_t values;
        PyObject *key = build_key(args, self->valued, &values), *entry;
        if (key == NULL)
            return NULL;
        entry = key == Py_None ? NULL : PyDict_GetItemWithError(self->fast, key);
        Py_DECREF(key);
        if (entry != NULL) {
            PyObject *tick, *inputs;
            Py_INCREF(entry); /* (borrowed from the dict, which the call may change) */
            tick = self->hits ? PyIter_Next(self->hits) : NULL;
            Py_XDECREF(tick);
            inputs = PyErr_Occurred() ? NULL
                     : values ? runner_inputs(args, self->valued, values) : Py_NewRef(args);
            result = inputs == NULL ? NULL : cached_call(entry, inputs);
            Py_XDECREF(inputs);
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
    Py_VISIT(self->valued);
    return 0;
}

static int dispatcher_clear(PyObject *op)
{
    Dispatcher *self = (Dispatcher *)op;
    Py_CLEAR(self->fast);
    Py_CLEAR(self->hits);
    Py_CLEAR(self->valued);
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
    {"_valued", T_OBJECT_EX, offsetof(Dispatcher, valued), 0,
     "per position, whether an int there is needed as a value (bytes; JitFunction's)"},
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
    {"fast_key", fast_key, METH_VARARGS,
     "fast_key(args: tuple, valued: bytes) -> bytes | None: the cached call's key of "
     "positional arguments; None for a call it holds no key of."},
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
