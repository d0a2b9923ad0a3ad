"""The one compiled part of tracejit: the cached call in C (src/tracejit/_dispatch.c).

Everything else is in pyproject.toml. The extension is optional: without a C compiler
the install goes on and jitted functions use the same steps in Python
(``tracejit.dispatch.PythonDispatcher``), about 0.4-0.8 us slower a call.
"""

import numpy
from setuptools import Extension, setup

setup(ext_modules=[Extension("tracejit._dispatch", ["src/tracejit/_dispatch.c"],
                             include_dirs=[numpy.get_include()], optional=True)])
