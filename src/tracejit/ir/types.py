"""Abstract values: shape, dtype and NEP 50 weak-typing flag of every IR value."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Default dtype of a Python scalar of each kind (NumPy 2 on 64-bit Linux).
WEAK_DEFAULT = {
    int: np.dtype(np.int64),
    float: np.dtype(np.float64),
    complex: np.dtype(np.complex128),
}

_SHORT = {"b": "bool", "i": "i", "u": "u", "f": "f", "c": "c"}


def short_dtype(dtype: np.dtype) -> str:
    """``f32``, ``i64``, ``bool``: the compact dtype names the printer uses."""
    if dtype.kind == "b":
        return "bool"
    if dtype.kind == "O":  # only a random generator argument (ir/random_ops.GENERATOR)
        return "rng"
    return f"{_SHORT.get(dtype.kind, dtype.kind)}{dtype.itemsize * 8}"


@dataclass(frozen=True, slots=True)
class TensorType:
    """Static type of a value. ``weak`` marks a traced Python scalar (NEP 50 weak typing)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    weak: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)  # (np.prod costs ~10x as much, in every pass)

    def promotion_operand(self):
        """What NumPy's dtype resolution should see: the dtype, or the Python type if weak."""
        if self.weak:
            return {"i": int, "f": float, "c": complex}[self.dtype.kind]
        return self.dtype

    def __str__(self) -> str:
        if self.dtype.kind == "O" and self.ndim == 1:  # a loop's results (ir/loop_ops.py)
            return f"tuple[{self.shape[0]}]"
        dims = ",".join(str(d) for d in self.shape)
        return f"{short_dtype(self.dtype)}[{dims}]" + ("~" if self.weak else "")


def type_of_constant(value) -> TensorType:
    """Type of a literal: Python int/float/complex are weak, everything else strong."""
    if type(value) in WEAK_DEFAULT:
        return TensorType((), WEAK_DEFAULT[type(value)], weak=True)
    arr = np.asarray(value)
    return TensorType(arr.shape, arr.dtype)
