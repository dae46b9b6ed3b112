#!/usr/bin/env bash
# GPU checks, in two steps: compile where MLIR is, run where the GPU is.
#
#   scripts/gpu_check.sh compile   # CPU machine with adjit installed (MLIR, ptxas optional):
#                                  # PTX tests, then every GPU test kernel into
#                                  # build/gpu_check/kernels (the kernel cache format)
#   scripts/gpu_check.sh run       # GPU machine: Python 3.12, NumPy, cuda-bindings, pytest,
#                                  # no MLIR. Execution tests + benchmarks, under 8 minutes;
#                                  # results in $OUT/gpu_check_results.txt (or build/gpu_check/)
#
# With the session's device tool, after `compile` here:
#   run(command="bash scripts/gpu_check.sh run", carry=["build/gpu_check"], timeout_s=540)
# The GPU machine imports only adjit/runtime/{cuda,device_array,kernel_cache}.py, through a
# package made of just those (the full `adjit` package imports MLIR through its frontend).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
WORK=$REPO/build/gpu_check

case "${1:-}" in
compile)
    PY=${PYTHON:-python}
    rm -rf "$WORK"
    mkdir -p "$WORK/kernels"
    "$PY" -m pytest "$REPO/tests/gpu" -q -p no:cacheprovider
    (cd "$REPO/tests/gpu" && "$PY" gpu_kernels.py "$WORK/kernels")
    echo "now run 'scripts/gpu_check.sh run' on the GPU machine with build/gpu_check carried"
    ;;
run)
    PY=${PYTHON:-python3}
    RESULTS=${OUT:-$WORK}/gpu_check_results.txt
    mkdir -p "$(dirname "$RESULTS")"
    [ -d "$WORK/kernels" ] || { echo "no $WORK/kernels: run '$0 compile' first" >&2; exit 2; }
    PKG=$WORK/pkg
    rm -rf "$PKG"
    mkdir -p "$PKG/adjit/runtime" "$PKG/mlir"
    touch "$PKG/adjit/__init__.py" "$PKG/adjit/runtime/__init__.py"
    cp "$REPO"/runtime/{cuda,device_array,kernel_cache}.py "$PKG/adjit/runtime/"
    # proves, wherever this runs, that nothing here needs MLIR
    echo 'raise ImportError("MLIR is not used on the GPU machine")' >"$PKG/mlir/__init__.py"
    export PYTHONPATH="$PKG:$REPO/tests/gpu" ADJIT_GPU_TEST_KERNELS="$WORK/kernels"
    # Run from $WORK: `python -m` puts the working directory first on sys.path, and the
    # repository root's adjit/ would shadow the runtime-only package.
    cd "$WORK"
    {
        echo "== $(date -u) $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || true)"
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
        "$PY" -c "import sys, numpy, cuda.bindings; print(sys.version); print('numpy', numpy.__version__, 'cuda-bindings', cuda.bindings.__version__)"
        "$PY" -c "import gpu_kernels as g; [g.get_kernel(n) for n in g.CASES]; print(len(g.CASES), 'kernels load from the cache')"
        echo "== tests"
        status=0
        timeout 300 "$PY" -m pytest "$REPO/tests/gpu/test_gpu_exec.py" -q -rs -p no:cacheprovider \
            --noconftest --rootdir="$REPO" || status=$?
        echo "== benchmarks"
        timeout 150 "$PY" "$REPO/tests/gpu/bench_gpu.py" || status=$?
        echo "== exit status $status"
        exit $status
    } 2>&1 | tee "$RESULTS"
    ;;
*)
    sed -n '2,14p' "$0" >&2
    exit 2
    ;;
esac
