"""What generated kernels use to read their arguments and share work (Numba intrinsics).

A kernel module marks its kernel with ``@cfunc(signature)``, this module's: the record of
a C function for :mod:`.compiler` to compile ahead of time into a shared library, where
``numba.cfunc`` would compile it for Numba's JIT at once.

A kernel is ``void kernel(int64 args)`` (see :mod:`.native`): ``arg(args, j, dtype)`` is a
typed pointer to the data of array ``j`` of the argument tuple, which the kernel wraps in a
``view`` (Numba's ``carray``, lighter to compile) or dereferences (0-d).
``value(args, j)`` is the float64 value of item ``j``, a Python float (the runner passes
weakly typed scalars as ``float(x)``: a tenth of a microsecond less than a 0-d array).
``dim(args, j, d)`` is that array's extent ``d``, as an unsigned 64-bit value (``j`` and
``d`` are literals in a generated kernel, run-time values in a prebuilt one): a kernel
takes its outer extent at run time (one compiled kernel serves every batch size), its
inner extents are literals (constant strides, vector loops). ``stack(n, dtype)`` is a
pointer to ``n`` elements of stack memory (per-thread scratch that LLVM keeps in
registers where it can; Numba's heap arrays would tie the kernel to Numba's runtime).
``thread_id()``, ``num_threads()`` and ``barrier()`` are libgomp's, as unsigned 64-bit
values: loop indices derived from them stay unsigned, so Numba emits no negative-index
wraparound and the loops still vectorise.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

from .native import ARRAY_DATA, ARRAY_DIMENSIONS, FLOAT_VALUE, TUPLE_ITEMS

U = np.uint64

@dataclass(frozen=True)
class CFunction:
    """A kernel as its module defines it: the Python function to compile as the C function
    of ``signature`` (a Numba signature), with ``cfunc``'s ``options``."""

    py_func: Callable
    signature: object
    options: dict


def cfunc(signature, **options) -> Callable[[Callable], CFunction]:
    """``numba.cfunc``'s decorator, deferred: the kernel is compiled by :mod:`.compiler`."""
    return lambda py_func: CFunction(py_func, signature, options)


barrier = types.ExternalFunction("GOMP_barrier", types.void())


_WORD = ir.IntType(64)


def _load(builder, address):
    """The 64-bit word at integer ``address``."""
    return builder.load(builder.inttoptr(address, _WORD.as_pointer()))


def _word(builder, ty, value):
    """An index argument of integer type ``ty``: a literal's int (a generated kernel's
    argument numbers, as constant offsets), or its run-time value as 64 bits (the prebuilt
    kernels read a program's operands by number)."""
    if isinstance(ty, types.IntegerLiteral):
        return ty.literal_value
    return value if ty.bitwidth == 64 else builder.zext(value, _WORD)


def _item(builder, args, index):
    """The address of the object ``args[index]`` (``args``: the argument tuple's address;
    ``index``: a Python int or a 64-bit value)."""
    if isinstance(index, int):
        return _load(builder, builder.add(args, _WORD(TUPLE_ITEMS + 8 * index)))
    return _load(builder, builder.add(args, builder.add(_WORD(TUPLE_ITEMS),
                                                        builder.mul(index, _WORD(8)))))


def _array_field(builder, args, index, offset: int):
    """The 64-bit field at ``offset`` of the array object ``args[index]``."""
    return _load(builder, builder.add(_item(builder, args, index), _WORD(offset)))


@intrinsic
def arg(typingctx, args, j, dtype):
    """``(T*) ((PyArrayObject *) PyTuple_GET_ITEM(args, j))->data``"""
    if not isinstance(j, types.Integer):
        return None
    ty = dtype.dtype

    def codegen(context, builder, signature, llargs):
        index = _word(builder, signature.args[1], llargs[1])
        data = _array_field(builder, llargs[0], index, ARRAY_DATA)
        return builder.inttoptr(data, context.get_value_type(types.CPointer(ty)))

    return types.CPointer(ty)(args, j, dtype), codegen


@intrinsic
def value(typingctx, args, j):
    """``PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(args, j))``"""
    if not isinstance(j, types.Integer):
        return None

    def codegen(context, builder, signature, llargs):
        item = _item(builder, llargs[0], _word(builder, signature.args[1], llargs[1]))
        address = builder.add(item, _WORD(FLOAT_VALUE))
        return builder.load(builder.inttoptr(address, ir.DoubleType().as_pointer()))

    return types.float64(args, j), codegen


@intrinsic
def dim(typingctx, args, j, d):
    """``(uint64) ((PyArrayObject *) PyTuple_GET_ITEM(args, j))->dimensions[d]``"""
    if not (isinstance(j, types.Integer) and isinstance(d, types.Integer)):
        return None

    def codegen(context, builder, signature, llargs):
        index = _word(builder, signature.args[1], llargs[1])
        dims = _array_field(builder, llargs[0], index, ARRAY_DIMENSIONS)
        axis = _word(builder, signature.args[2], llargs[2])
        offset = _WORD(8 * axis) if isinstance(axis, int) else builder.mul(axis, _WORD(8))
        return _load(builder, builder.add(dims, offset))

    return types.uint64(args, j, d), codegen


@intrinsic
def view(typingctx, pointer, shape):
    """``carray(pointer, shape)``: the C-contiguous array of ``shape`` (a tuple of integers)
    at ``pointer``, the same array structure, typed and lowered directly: Numba's
    ``carray`` resolves a generic template per call (a dtype argument, Fortran order),
    front-end work for every argument of every kernel."""
    if not (isinstance(pointer, types.CPointer) and isinstance(shape, types.BaseTuple)
            and all(isinstance(d, types.Integer) for d in shape)):
        return None
    array = types.Array(pointer.dtype, len(shape), "C")

    def codegen(context, builder, signature, llargs):
        dims = [context.cast(builder, builder.extract_value(llargs[1], d), ty, types.intp)
                for d, ty in enumerate(shape)]
        itemsize = cgutils.intp_t(context.get_abi_sizeof(context.get_data_type(array.dtype)))
        strides, stride = [], itemsize
        for extent in reversed(dims):
            strides.insert(0, stride)
            stride = builder.mul(stride, extent)
        out = make_array(array)(context, builder)
        populate_array(out, data=llargs[0], shape=dims, strides=strides, itemsize=itemsize,
                       meminfo=None)
        return out._getvalue()

    return array(pointer, shape), codegen


@intrinsic
def stack(typingctx, n, dtype):
    """Pointer to ``n`` (a literal) elements of ``dtype`` on the stack, allocated once at
    the kernel's entry."""
    if not isinstance(n, types.IntegerLiteral):
        return None
    count, ty = n.literal_value, dtype.dtype

    def codegen(context, builder, signature, llargs):
        return cgutils.alloca_once(builder, context.get_data_type(ty), size=count)

    return types.CPointer(ty)(n, dtype), codegen


def _omp(name: str):
    """An intrinsic for libgomp's ``int name(void)``, widened to an unsigned 64-bit value
    (typed and lowered as one call: an ``inline`` Numba function costs a kernel's compile
    an inlining pass over its IR)."""

    @intrinsic
    def call(typingctx):
        def codegen(context, builder, signature, args):
            fn = cgutils.get_or_insert_function(builder.module,
                                                ir.FunctionType(ir.IntType(32), []), name)
            return builder.zext(builder.call(fn, []), _WORD)

        return types.uint64(), codegen

    return call


thread_id = _omp("omp_get_thread_num")
num_threads = _omp("omp_get_num_threads")
