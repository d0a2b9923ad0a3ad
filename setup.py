"""The compiled parts of tracejit, built at install; everything else is in pyproject.toml.

- The cached call in C (``src/tracejit/_dispatch.c``). Optional: without a C compiler the
  install goes on and jitted functions use the same steps in Python
  (``tracejit.dispatch.PythonDispatcher``), about 0.4-0.8 us slower a call.
- The prebuilt kernels (``tracejit.backends.cpu.prebuilt``): Numba compiles them here, once
  (~30 s), so that a new function's first call need not wait for Numba. Optional too:
  without them (no C compiler, a failed compile) first calls compile their kernels as they
  did before, and ``python -m tracejit prebuild`` builds them later.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class BuildWithPrebuilt(build_ext):
    """``build_ext``, then the prebuilt kernels into ``_prebuilt/`` beside the package
    (the source tree for an editable install), by the package's own code in a process of
    the build's Python (which has Numba: pyproject.toml's build requirements)."""

    def run(self) -> None:
        super().run()
        src = Path(__file__).resolve().parent / "src"
        in_place = self.inplace or getattr(self, "editable_mode", False)
        target = (src if in_place else Path(self.build_lib)) / "tracejit" / "_prebuilt"
        # (pip's isolated build drops PYTHONPATH's entries from sys.path: put src there)
        script = ("import runpy, sys; sys.path.insert(0, sys.argv[1]); "
                  "sys.argv[1:2] = ['prebuild']; runpy.run_module('tracejit', "
                  "run_name='__main__', alter_sys=True)")
        done = subprocess.run([sys.executable, "-c", script, str(src), str(target)],
                              env={**os.environ, "TRACEJIT_DISK_CACHE": "0"},
                              capture_output=True, text=True)
        print(done.stdout.strip() or "", file=sys.stderr)
        if done.returncode:
            print("warning: tracejit's prebuilt kernels were not built (first calls will "
                  f"compile their kernels instead):\n{done.stderr}", file=sys.stderr)

setup(ext_modules=[Extension("tracejit._dispatch", ["src/tracejit/_dispatch.c"],
                             include_dirs=[numpy.get_include()], optional=True)],
      cmdclass={"build_ext": BuildWithPrebuilt})
