"""What a fused loop driver (``fused.py``) uses beyond a kernel's ``abi``: a pointer into
an argument array at an element offset computed at run time (the current step's slice of
a stacked input or output, or the half of a double-buffered carry being read or written),
and a BLAS matrix product called through a function pointer the caller passes in.
Imported only by generated driver modules, so only where Numba compiles one."""

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .abi import _array_field
from .native import ARRAY_DATA


@intrinsic
def at(typingctx, args, j, dtype, offset):
    """``(T*) ((PyArrayObject *) PyTuple_GET_ITEM(args, j))->data + offset``"""
    if not isinstance(j, types.IntegerLiteral) or not isinstance(offset, types.Integer):
        return None
    index, ty = j.literal_value, dtype.dtype

    def codegen(context, builder, signature, llargs):
        data = _array_field(builder, llargs[0], index, ARRAY_DATA)
        step = context.get_abi_sizeof(context.get_data_type(ty))
        word = ir.IntType(64)
        off = builder.sext(llargs[3], word) if llargs[3].type.width < 64 else llargs[3]
        data = builder.add(data, builder.mul(off, word(step)))
        return builder.inttoptr(data, context.get_value_type(types.CPointer(ty)))

    return types.CPointer(ty)(args, j, dtype, offset), codegen


@intrinsic
def gemm(typingctx, address, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc):
    """``cblas_?gemm(RowMajor, trans_a, trans_b, m, n, k, 1, a, lda, b, ldb, 0, c, ldc)``
    through the function at ``address`` (OpenBLAS's 64-bit-integer CBLAS, which the
    driver's caller finds in NumPy's BLAS and passes in: an address is no constant of a
    kernel cached on disk)."""
    if not all(isinstance(x, types.CPointer) for x in (a, b, c)):
        return None
    ty = a.dtype

    def codegen(context, builder, signature, llargs):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        real = context.get_value_type(ty)
        ptr = real.as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, real, ptr, i64,
                                               ptr, i64, real, ptr, i64])
        fn = builder.inttoptr(llargs[0], fnty.as_pointer())
        (_, ta, tb, m_, n_, k_, a_, lda_, b_, ldb_, c_, ldc_) = llargs
        builder.call(fn, [i32(101), builder.trunc(ta, i32), builder.trunc(tb, i32), m_, n_, k_,
                          real(1.0), a_, lda_, b_, ldb_, real(0.0), c_, ldc_])
        return context.get_dummy_value()

    return types.void(address, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc), codegen
