#!/usr/bin/env bash
# GPU checks, in two steps: compile where MLIR is, run where the GPU is.
#
#   scripts/gpu_check.sh compile   # CPU machine with adjit installed (MLIR, ptxas optional):
#                                  # the GPU tests that need no GPU (PTX, launcher, cache),
#                                  # then every kernel the GPU step launches: the IR corpus
#                                  # into build/gpu_check/kernels, and the user-path tests' and
#                                  # benchmarks' kernels into the kernel cache build/gpu_check/cache
#   scripts/gpu_check.sh run       # GPU machine: Python 3.12, NumPy, cuda-bindings, pytest,
#                                  # no MLIR. Execution tests + benchmarks, under 8 minutes;
#                                  # results in $OUT/gpu_check_results.txt (or build/gpu_check/)
#
# With the session's device tool, after `compile` here:
#   run(command="bash scripts/gpu_check.sh run", carry=["build/gpu_check"], timeout_s=540)
# The GPU machine runs what users run: `import adjit` (without MLIR: a stand-in `mlir` package
# refuses to import) and kernels launched with device="cuda", found in ADJIT_CACHE_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
WORK=$REPO/build/gpu_check
# Compiled kernels are keyed on these settings: both steps must see the same (the defaults).
unset ADJIT_DEBUG ADJIT_CUDA_CHIP
export ADJIT_CACHE_DIR=$WORK/cache

case "${1:-}" in
compile)
    PY=${PYTHON:-python}
    rm -rf "$WORK"
    mkdir -p "$WORK/kernels"
    "$PY" -m pytest "$REPO/tests/gpu" -q -p no:cacheprovider
    (cd "$REPO/tests/gpu" && "$PY" gpu_kernels.py "$WORK/kernels")
    "$PY" "$REPO/tests/gpu/user_kernels.py"
    "$PY" "$REPO/benchmarks/bench_gpu.py" --compile
    # The GPU machine builds adjit's native extension (the allocator, the dispatcher) for its
    # own Python, from nanobind's sources, which it cannot download: carried as a wheel.
    "$PY" -m pip download -q --no-deps --only-binary=:all: -d "$WORK/wheels" nanobind==3.1.0 \
        setuptools
    echo "now run 'scripts/gpu_check.sh run' on the GPU machine with build/gpu_check carried"
    ;;
run)
    PY=${PYTHON:-python3}
    RESULTS=${OUT:-$WORK}/gpu_check_results.txt
    mkdir -p "$(dirname "$RESULTS")"
    [ -d "$WORK/kernels" ] && [ -d "$ADJIT_CACHE_DIR" ] || {
        echo "no compiled kernels in $WORK: run '$0 compile' first" >&2; exit 2; }
    # adjit's native extension, built here for this Python (setup.py, with g++; nanobind
    # and setuptools come as the wheels `compile` fetched).
    "$PY" -m pip install -q --no-index --no-deps --target "$WORK/site" "$WORK"/wheels/*.whl
    (cd "$REPO" && PYTHONPATH="$WORK/site" "$PY" setup.py -q build_ext --inplace) >"$WORK/build_ext.log" 2>&1 || {
        cat "$WORK/build_ext.log" >&2; echo "building adjit's native extension failed" >&2; exit 2; }
    # The adjit package from the repository, without installing it.
    PKG=$WORK/pkg
    rm -rf "$PKG"
    mkdir -p "$PKG/mlir"
    ln -s "$REPO/adjit" "$PKG/adjit"
    # proves, wherever this runs, that nothing here needs MLIR
    echo 'raise ModuleNotFoundError("MLIR is not used on the GPU machine", name="mlir")' \
        >"$PKG/mlir/__init__.py"
    export PYTHONPATH="$PKG:$REPO/tests/gpu" ADJIT_GPU_TEST_KERNELS="$WORK/kernels"
    # Run from $WORK: `python -m` puts the working directory first on sys.path, and nothing
    # there shadows $PKG.
    cd "$WORK"
    {
        echo "== $(date -u) $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || true)"
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
        "$PY" -c "import sys, numpy, cuda.bindings; print(sys.version); print('numpy', numpy.__version__, 'cuda-bindings', cuda.bindings.__version__)"
        "$PY" -c "import gpu_kernels as g; [g.get_kernel(n) for n in g.CASES]; print(len(g.CASES), 'corpus kernels load from the cache')"
        # The user-path calls under compile_only: without MLIR, each must find its kernels.
        "$PY" -c "import user_kernels as u; u.compile_cases(); print(len(u.CASES), 'user-path cases find their kernels in the cache')"
        "$PY" "$REPO/benchmarks/bench_gpu.py" --compile && echo "the benchmarks find their kernels in the cache"
        echo "== tests"
        status=0
        timeout 300 "$PY" -m pytest "$REPO/tests/gpu/test_gpu_exec.py" \
            "$REPO/tests/gpu/test_user_kernels.py" -q -rs -p no:cacheprovider \
            --noconftest --rootdir="$REPO" || status=$?
        echo "== benchmarks"
        timeout 150 "$PY" "$REPO/benchmarks/bench_gpu.py" || status=$?
        echo "== exit status $status"
        exit $status
    } 2>&1 | tee "$RESULTS"
    ;;
*)
    sed -n '2,17p' "$0" >&2
    exit 2
    ;;
esac
