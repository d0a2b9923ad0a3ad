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
        if (!plain_number(descr->type_num) || room < 1 + nd || !PyArray_IS_C_CONTIGUOUS(arr))
            return 0; /* (another layout is part of the signature: api._leaf_key) */
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
/* The finishers the cached call does itself (dispatch.py's): ``first`` (``outs[0]``, a
   function's one array result) and ``none`` (None, a function returning nothing), each
   a Python frame otherwise (20 ns of the cached call), and ``tuple`` (a flat tuple of
   arrays). */
static PyObject *finish_first = NULL;
static PyObject *finish_none = NULL;
/* ... and their C-ordered forms (``first_ordered``, ``ordered_tuple``): an array result
   that is not C-contiguous (a NumPy call of the runner's follows its operands' layout)
   goes to the Python finisher, which copies it in C order, as NumPy lays its result. */
static PyObject *finish_first_ordered = NULL;
static PyObject *finish_ordered_tuple = NULL;
static PyObject *str_run, *str_finish, *str_call, *str_gpu_requested;

static PyObject *configure(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *p, *ns, *first = NULL, *none = NULL, *first_ordered = NULL, *ordered_tuple = NULL;
    if (!PyArg_ParseTuple(args, "O!O!|OOOO", &PyList_Type, &p, &PyDict_Type, &ns, &first, &none,
                          &first_ordered, &ordered_tuple))
        return NULL;
    Py_XSETREF(profiles, Py_NewRef(p));
    Py_XSETREF(targets_ns, Py_NewRef(ns));
    Py_XSETREF(finish_first, Py_XNewRef(first));
    Py_XSETREF(finish_none, Py_XNewRef(none));
    Py_XSETREF(finish_first_ordered, Py_XNewRef(first_ordered));
    Py_XSETREF(finish_ordered_tuple, Py_XNewRef(ordered_tuple));
    Py_RETURN_NONE;
}

/* Whether ``o`` is returned as it is by the C-ordered finishers: no ndarray, or a
   C-contiguous one. */
static int c_ordered(PyObject *o)
{
    return !PyArray_CheckExact(o) || PyArray_IS_C_CONTIGUOUS((PyArrayObject *)o);
}

/* Whether every item of the list ``out`` is c_ordered. */
static int all_c_ordered(PyObject *out)
{
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(out); k++)
        if (!c_ordered(PyList_GET_ITEM(out, k)))
            return 0;
    return 1;
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
    if (PyList_CheckExact(out) && finish == finish_first_ordered && PyList_GET_SIZE(out) > 0 &&
        c_ordered(PyList_GET_ITEM(out, 0)))
        result = Py_NewRef(PyList_GET_ITEM(out, 0));
    else if (PyList_CheckExact(out) && finish == finish_ordered_tuple && all_c_ordered(out))
        result = PyList_AsTuple(out);
    else if (PyList_CheckExact(out) &&
        ((finish == finish_first && PyList_GET_SIZE(out) > 0) || finish == finish_none ||
         finish == (PyObject *)&PyTuple_Type))
        result = finish == finish_first ? Py_NewRef(PyList_GET_ITEM(out, 0))
                 : finish == finish_none ? Py_NewRef(Py_None) : PyList_AsTuple(out);
    else
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

/* A signature's write-back, in C: ``api._Writes.fast``'s function for a function that
   writes to its arguments, the same steps as the Python it writes out otherwise (which
   costs 0.3-0.5 us a call in attribute look-ups: each ``flags`` is a new object). Before
   the runner: every written argument an exact ndarray that is writeable, has no base and
   owns its memory (a destination ``o<j>`` where it is also C-contiguous, aligned and of
   the output's dtype), every other array argument with no base and owning its memory,
   none of them the written one; any other call goes the checked way (``slow``). After
   it: an output that may be a written argument's memory, or a written region's new value
   that is not a host array, goes through ``store``; the
   written regions are stored (``leaf[key] = out`` unless the runner wrote in the
   caller's array itself); the function's outputs are returned, an aliased one as the
   argument or ``returned(leaf, path, out, args, outs)``.

   The spec is a tuple of Python objects, read at each call (a few ns an item):
     written     ((i, ((j, dtype), ...)), ...)   per written leaf, its destinations
     owned       (j, ...)                        other leaves that must own their memory
     distinct    ((i, (j, ...)), ...)            leaves that must not be leaf i itself
     kwnames     ("o<j>", ...)                   the runner's destination keywords
     dests       (j, ...)                        the output position of each keyword
     unaliased   ((k, (i, ...)), ...)            outputs to check, the written leaves
                                                 each must not be (besides having a base)
     back        ((j, i, key), ...)              the stores into written leaves
     results     (None | (i, path, direct), ...) per output of the function's own */
typedef struct {
    PyObject_HEAD
    PyObject *fn, *slow, *store, *returned;
    PyObject *written, *owned, *distinct, *kwnames, *dests, *unaliased, *back, *results;
} WriteBack;

#define MAX_DESTS 32

static Py_ssize_t item_index(PyObject *tuple, Py_ssize_t k)
{
    return PyLong_AsSsize_t(PyTuple_GET_ITEM(tuple, k));
}

static int owns_its_memory(PyObject *a)
{
    return PyArray_BASE((PyArrayObject *)a) == NULL &&
           PyArray_CHKFLAGS((PyArrayObject *)a, NPY_ARRAY_OWNDATA);
}

/* ``outs[k]`` (borrowed), or NULL with an error where the runner returned fewer. */
static PyObject *output(PyObject *outs, Py_ssize_t k)
{
    if (k < 0 || k >= PyList_GET_SIZE(outs)) {
        PyErr_SetString(PyExc_IndexError, "tracejit: a runner returned too few outputs (a bug)");
        return NULL;
    }
    return PyList_GET_ITEM(outs, k);
}

static PyObject *writeback_call(PyObject *op, PyObject *args, PyObject *kwargs)
{
    WriteBack *self = (WriteBack *)op;
    Py_ssize_t nargs = PyTuple_GET_SIZE(args), ndest = PyTuple_GET_SIZE(self->dests);
    Py_ssize_t nresults = PyTuple_GET_SIZE(self->results);
    PyObject *dest_out[MAX_DESTS];
    Py_ssize_t dest_pos[MAX_DESTS];
    PyObject *outs, *results;
    if (kwargs != NULL || ndest > MAX_DESTS)
        return PyObject_Call(self->slow, args, kwargs);
    for (Py_ssize_t d = 0; d < ndest; d++) {
        dest_pos[d] = item_index(self->dests, d);
        dest_out[d] = Py_None;
    }
    for (Py_ssize_t w = 0; w < PyTuple_GET_SIZE(self->written); w++) {
        PyObject *spec = PyTuple_GET_ITEM(self->written, w);
        Py_ssize_t i = item_index(spec, 0);
        PyObject *leaf = i < nargs ? PyTuple_GET_ITEM(args, i) : NULL, *outputs;
        if (leaf == NULL || !PyArray_CheckExact(leaf) ||
            !PyArray_CHKFLAGS((PyArrayObject *)leaf, NPY_ARRAY_WRITEABLE) || !owns_its_memory(leaf))
            return PyObject_Call(self->slow, args, NULL);
        outputs = PyTuple_GET_ITEM(spec, 1);
        for (Py_ssize_t t = 0; t < PyTuple_GET_SIZE(outputs); t++) {
            PyObject *pair = PyTuple_GET_ITEM(outputs, t);
            Py_ssize_t j = item_index(pair, 0);
            int fits = PyArray_CHKFLAGS((PyArrayObject *)leaf,
                                        NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED) &&
                       (PyObject *)PyArray_DESCR((PyArrayObject *)leaf) == PyTuple_GET_ITEM(pair, 1);
            for (Py_ssize_t d = 0; d < ndest; d++)
                if (dest_pos[d] == j)
                    dest_out[d] = fits ? leaf : Py_None;
        }
    }
    for (Py_ssize_t t = 0; t < PyTuple_GET_SIZE(self->owned); t++) {
        Py_ssize_t j = item_index(self->owned, t);
        PyObject *x = j < nargs ? PyTuple_GET_ITEM(args, j) : NULL;
        if (x == NULL || (PyArray_Check(x) && !owns_its_memory(x)))
            return PyObject_Call(self->slow, args, NULL);
    }
    for (Py_ssize_t t = 0; t < PyTuple_GET_SIZE(self->distinct); t++) {
        PyObject *spec = PyTuple_GET_ITEM(self->distinct, t), *others = PyTuple_GET_ITEM(spec, 1);
        PyObject *leaf = PyTuple_GET_ITEM(args, item_index(spec, 0));
        for (Py_ssize_t u = 0; u < PyTuple_GET_SIZE(others); u++) {
            Py_ssize_t j = item_index(others, u);
            if (j >= nargs || PyTuple_GET_ITEM(args, j) == leaf)
                return PyObject_Call(self->slow, args, NULL);
        }
    }
    if (PyErr_Occurred())
        return NULL;
    {  /* the runner: the leaves, then a destination per keyword */
        PyObject *stack[MAX_ARGS + MAX_DESTS];
        if (nargs > MAX_ARGS)
            return PyObject_Call(self->slow, args, NULL);
        for (Py_ssize_t a = 0; a < nargs; a++)
            stack[a] = PyTuple_GET_ITEM(args, a);
        for (Py_ssize_t d = 0; d < ndest; d++)
            stack[nargs + d] = dest_out[d];
        outs = PyObject_Vectorcall(self->fn, stack, (size_t)nargs,
                                   ndest ? self->kwnames : NULL);
    }
    if (outs != NULL && !PyList_CheckExact(outs))  /* (a runner returns a list) */
        Py_SETREF(outs, PySequence_List(outs));
    if (outs == NULL)
        return NULL;
    for (Py_ssize_t t = 0; t < PyTuple_GET_SIZE(self->unaliased); t++) {
        PyObject *spec = PyTuple_GET_ITEM(self->unaliased, t), *unsafe = PyTuple_GET_ITEM(spec, 1);
        PyObject *o = output(outs, item_index(spec, 0));
        int stored = 0;
        if (o == NULL) {
            Py_DECREF(outs);
            return NULL;
        }
        if (!PyArray_Check(o)) {
            /* a written region's new value that is not a host array (a GPU's result for
               a host argument): ``store`` copies it to the host first */
            if (item_index(spec, 0) >= nresults && !PyArray_IsScalar(o, Generic)) {
                PyObject *result = PyObject_CallFunctionObjArgs(self->store, args, outs, NULL);
                Py_DECREF(outs);
                return result;
            }
            continue;
        }
        stored = PyArray_BASE((PyArrayObject *)o) != NULL;
        for (Py_ssize_t u = 0; !stored && u < PyTuple_GET_SIZE(unsafe); u++)
            stored = PyTuple_GET_ITEM(args, item_index(unsafe, u)) == o;
        if (stored) {
            PyObject *result = PyObject_CallFunctionObjArgs(self->store, args, outs, NULL);
            Py_DECREF(outs);
            return result;
        }
    }
    for (Py_ssize_t t = 0; t < PyTuple_GET_SIZE(self->back); t++) {
        PyObject *spec = PyTuple_GET_ITEM(self->back, t);
        PyObject *o = output(outs, item_index(spec, 0));
        PyObject *leaf = PyTuple_GET_ITEM(args, item_index(spec, 1));
        if (o == NULL || (o != leaf && PyObject_SetItem(leaf, PyTuple_GET_ITEM(spec, 2), o) < 0)) {
            Py_DECREF(outs);
            return NULL;
        }
    }
    results = PyList_New(PyTuple_GET_SIZE(self->results));
    for (Py_ssize_t k = 0; results != NULL && k < PyTuple_GET_SIZE(self->results); k++) {
        PyObject *spec = PyTuple_GET_ITEM(self->results, k), *o = output(outs, k), *value;
        if (o == NULL) {
            value = NULL;
        } else if (spec == Py_None) {
            value = Py_NewRef(o);
        } else {
            PyObject *leaf = PyTuple_GET_ITEM(args, item_index(spec, 0));
            value = PyTuple_GET_ITEM(spec, 2) == Py_True ? Py_NewRef(leaf)
                    : PyObject_CallFunctionObjArgs(self->returned, leaf, PyTuple_GET_ITEM(spec, 1),
                                                   o, args, outs, NULL);
        }
        if (value == NULL)
            Py_CLEAR(results);
        else
            PyList_SET_ITEM(results, k, value);
    }
    Py_DECREF(outs);
    return results;
}

static PyObject *writeback_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    WriteBack *self;
    PyObject *fn, *slow, *store, *returned, *written, *owned, *distinct, *kwnames, *dests,
        *unaliased, *back, *results;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "WriteBack takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOOOO!O!O!O!O!O!O!O!", &fn, &slow, &store, &returned,
                          &PyTuple_Type, &written, &PyTuple_Type, &owned, &PyTuple_Type,
                          &distinct, &PyTuple_Type, &kwnames, &PyTuple_Type, &dests,
                          &PyTuple_Type, &unaliased, &PyTuple_Type, &back, &PyTuple_Type,
                          &results))
        return NULL;
    if (PyTuple_GET_SIZE(kwnames) != PyTuple_GET_SIZE(dests) ||
        PyTuple_GET_SIZE(dests) > MAX_DESTS) {
        PyErr_SetString(PyExc_ValueError, "WriteBack: one keyword per destination, at most 32");
        return NULL;
    }
    self = (WriteBack *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->fn = Py_NewRef(fn);
    self->slow = Py_NewRef(slow);
    self->store = Py_NewRef(store);
    self->returned = Py_NewRef(returned);
    self->written = Py_NewRef(written);
    self->owned = Py_NewRef(owned);
    self->distinct = Py_NewRef(distinct);
    self->kwnames = Py_NewRef(kwnames);
    self->dests = Py_NewRef(dests);
    self->unaliased = Py_NewRef(unaliased);
    self->back = Py_NewRef(back);
    self->results = Py_NewRef(results);
    return (PyObject *)self;
}

static int writeback_traverse(PyObject *op, visitproc visit, void *arg)
{
    WriteBack *self = (WriteBack *)op;
    Py_VISIT(self->fn);
    Py_VISIT(self->slow);
    Py_VISIT(self->store);
    Py_VISIT(self->returned);
    Py_VISIT(self->written);
    Py_VISIT(self->owned);
    Py_VISIT(self->distinct);
    Py_VISIT(self->kwnames);
    Py_VISIT(self->dests);
    Py_VISIT(self->unaliased);
    Py_VISIT(self->back);
    Py_VISIT(self->results);
    return 0;
}

static int writeback_clear(PyObject *op)
{
    WriteBack *self = (WriteBack *)op;
    Py_CLEAR(self->fn);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->store);
    Py_CLEAR(self->returned);
    Py_CLEAR(self->written);
    Py_CLEAR(self->owned);
    Py_CLEAR(self->distinct);
    Py_CLEAR(self->kwnames);
    Py_CLEAR(self->dests);
    Py_CLEAR(self->unaliased);
    Py_CLEAR(self->back);
    Py_CLEAR(self->results);
    return 0;
}

static void writeback_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    writeback_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyMemberDef writeback_members[] = {
    {"fn", T_OBJECT_EX, offsetof(WriteBack, fn), READONLY, "the runner"},
    {NULL},
};

static PyTypeObject WriteBackType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracejit._dispatch.WriteBack",
    .tp_doc = "WriteBack(fn, slow, store, returned, written, owned, distinct, kwnames, dests, "
              "unaliased, back, results): a signature's write-back in C (see _dispatch.c).",
    .tp_basicsize = sizeof(WriteBack),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = writeback_new,
    .tp_call = writeback_call,
    .tp_traverse = writeback_traverse,
    .tp_clear = writeback_clear,
    .tp_dealloc = writeback_dealloc,
    .tp_members = writeback_members,
};

static PyMethodDef methods[] = {
    {"fast_key", fast_key, METH_VARARGS,
     "fast_key(args: tuple, valued: bytes) -> bytes | None: the cached call's key of "
     "positional arguments; None for a call it holds no key of."},
    {"configure", configure, METH_VARARGS,
     "configure(profiles: list, targets_namespace: dict[, first, none]): what allows the "
     "fast path, and the finishers it does itself."},
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
    if (PyType_Ready(&DispatcherType) < 0 || PyType_Ready(&WriteBackType) < 0)
        return NULL;
    m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Dispatcher", (PyObject *)&DispatcherType) < 0 ||
        PyModule_AddObjectRef(m, "WriteBack", (PyObject *)&WriteBackType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
