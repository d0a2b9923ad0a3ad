"""What a fused loop driver (``fused.py``) uses beyond a kernel's ``abi``: a pointer into
an argument array at an element offset computed at run time (the current step's slice of
a stacked input or output, or the half of a double-buffered carry being read or written).
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
