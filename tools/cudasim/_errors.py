"""The exceptions of the emulated CUDA (CuPy raises these kinds of errors, by these names)."""

from __future__ import annotations

_RUNTIME = {
    1: "cudaErrorInvalidValue: invalid argument",
    2: "cudaErrorMemoryAllocation: out of memory",
    100: "cudaErrorNoDevice: no CUDA-capable device is detected",
    101: "cudaErrorInvalidDevice: invalid device ordinal",
    700: "cudaErrorIllegalAddress: an illegal memory access was encountered",
    716: "cudaErrorMisalignedAddress: misaligned address",
    719: "cudaErrorLaunchFailure: unspecified launch failure",
}


class CUDARuntimeError(RuntimeError):
    """``cupy.cuda.runtime.CUDARuntimeError(status)``: a CUDA runtime API call failed with
    the integer ``status`` (cudaError_t); the message is CUDA's name and text for it, e.g.
    ``CUDARuntimeError(700)``: "cudaErrorIllegalAddress: an illegal memory access was
    encountered". As in CuPy, the status must be an int."""

    def __init__(self, status: int):
        if isinstance(status, bool) or not isinstance(status, int):
            raise TypeError(f"CUDARuntimeError takes a cudaError_t status (int), got "
                            f"{type(status).__name__}")
        self.status = status
        super().__init__(_RUNTIME.get(status, f"cudaError{status}: unrecognized error code"))


class CUDADriverError(RuntimeError):
    """As CuPy's ``cupy.cuda.driver.CUDADriverError``: a launch CUDA would refuse (bad grid
    or block, block different from ``__launch_bounds__``, a function of another device's
    module, an unknown kernel name)."""


class CompileError(RuntimeError):
    """g++ could not compile a module's CUDA C (CuPy raises ``CompileException`` for NVRTC
    errors); the message holds the compiler's output."""


class IllegalAddressError(RuntimeError):
    """A kernel wrote past the end (or before the start) of a device allocation it was
    given (CUDA: ``cudaErrorIllegalAddress``, when it notices)."""
