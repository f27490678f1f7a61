"""Build the typed Cython kernels of lcoding.

All kernels share one directive set.  ``LCODING_CYTHON_DEBUG=1`` turns bounds,
wrap-around and initialisation checks back on (a debug build); the release build
runs with them off because every array is validated once at the Python boundary.
"""
import glob
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("LCODING_CYTHON_DEBUG", "0") not in ("", "0")

directives = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "nonecheck": False,
    "cdivision": not DEBUG,
    "embedsignature": True,
}

# -g0: no debug info in the release build (it doubles the C compile time and is
# not needed to run); the debug build keeps it
extra_compile_args = ["-O3", "-g0"] if not DEBUG else ["-O0", "-g"]

# Every ``lcoding/**/_*.pyx`` is a kernel module; adding a file adds an extension.
KERNELS = sorted(
    os.path.splitext(os.path.relpath(path))[0].replace(os.sep, ".")
    for path in glob.glob(os.path.join("lcoding", "**", "_*.pyx"), recursive=True)
)
# Development aid: LCODING_ONLY=_reader,_dual_cd builds just those kernels in place.
if os.environ.get("LCODING_ONLY"):
    _only = {name.strip() for name in os.environ["LCODING_ONLY"].split(",")}
    KERNELS = [name for name in KERNELS if name.rsplit(".", 1)[-1] in _only]


def kernel_extension(name):
    path = name.replace(".", os.sep) + ".pyx"
    return Extension(
        name,
        [path],
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=extra_compile_args,
    )


setup(
    ext_modules=cythonize(
        [kernel_extension(name) for name in KERNELS],
        compiler_directives=directives,
        nthreads=os.cpu_count() or 1,
    ),
    # compile the kernels in parallel (a fresh install builds ~20 extensions)
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
)
