"""Compiling the generated CUDA C with NumPy's arithmetic, and keeping the result on disk.

``cupy.RawModule`` compiles with ``-ftz=true`` appended after the caller's options, so
float32 results below the normal range flush to zero (``np.nextafter(0, 1)`` and
``np.spacing`` came back as 1.2e-38 instead of 1.4e-45), and NVRTC contracts ``a * b + c``
into one fused multiply-add unless told not to (``x * 3 + 0.5`` rounded once where NumPy
rounds twice; through a rounding step such as ``quantile``'s ``closest_observation`` that
one ULP became a different element). Both were seen on an H100 on 2026-11-27. So the
backend calls NVRTC itself (CuPy's ``compile_using_nvrtc``, which adds no options of its
own) with :data:`OPTIONS`, and loads the image with ``cupy.cuda.function.Module``, whose
``get_function`` gives kernels launched as ``RawModule``'s are.

Compiling a module costs NVRTC 0.1-0.5 s, so the image is kept in tracejit's disk cache
(``diskcache.save_image``: the same directory, size cap and ``python -m tracejit cache``
as the CPU backend's kernels), keyed by the source, the options, the GPU's compute
capability and CuPy's version.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..cpu import diskcache

# Subnormals kept, no contraction, IEEE division and square root: each float operation
# rounds as NumPy's does. Transcendental functions are libdevice's (within its ULP bounds).
OPTIONS = ("-ftz=false", "-fmad=false", "-prec-div=true", "-prec-sqrt=true")

@dataclass
class Counts:
    """Modules NVRTC compiled in this process, and modules loaded from the disk cache."""

    compiled: int = 0
    loaded: int = 0


counts = Counts()


def load(cupy, source: str, kernels: list[str]):
    """The compiled module of ``source`` for the current GPU (``.get_function(name)``);
    ``kernels`` names its functions (for the disk cache's listing)."""
    device = cupy.cuda.Device()
    tag = f"cuda-nvrtc {' '.join(OPTIONS)} sm_{device.compute_capability} cupy {cupy.__version__}"
    image = diskcache.load_image(source, tag)
    if image is None:
        compiler = importlib.import_module("cupy.cuda.compiler")
        image = compiler.compile_using_nvrtc(source, OPTIONS)[0]
        if isinstance(image, str):  # PTX, where NVRTC is older than the GPU
            image = image.encode()
        counts.compiled += 1
        diskcache.save_image(source, tag, image, kernels)
    else:
        counts.loaded += 1
    module = importlib.import_module("cupy.cuda.function").Module()
    module.load(image)
    return module
