"""The native extension `adjit.runtime._native` (adjit/runtime/native/: the dispatcher, the
counting allocator, memrefCopy, the thread pool, the checkpointing schedules, the
matrix products), built by `pip install` with nanobind, compiled from its sources here
(no CMake: setuptools compiles nanobind's one-file build, nb_combined.cpp, beside ours).
Everything else is in pyproject.toml."""
import os

import nanobind
import numpy
from setuptools import Extension, setup

NB = os.path.dirname(nanobind.__file__)

native = Extension(
    "adjit.runtime._native",
    sources=["adjit/runtime/native/dispatch.cpp", "adjit/runtime/native/allocator.cpp",
             "adjit/runtime/native/memref_copy.cpp", "adjit/runtime/native/parallel.cpp",
             "adjit/runtime/native/checkpoint.cpp", "adjit/runtime/native/mpi.cpp", "adjit/runtime/native/gemm.cpp",
             os.path.join(nanobind.source_dir(), "nb_combined.cpp")],
    include_dirs=[nanobind.include_dir(), os.path.join(NB, "ext", "robin_map", "include"),
                  numpy.get_include()],
    define_macros=[("NDEBUG", None), ("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    extra_compile_args=["-std=c++17", "-O2", "-fvisibility=hidden", "-fno-strict-aliasing",
                        "-ffunction-sections", "-fdata-sections"],
    extra_link_args=["-Wl,--gc-sections", "-Wl,-s"],
    language="c++",
)

setup(ext_modules=[native])
