"""Symbol names that generated code and the runtime share."""

# A host program's entry function (frontend/cuda_jit.py, runtime/host_program.py).
ENTRY = "entry"
# The runtime calls a host program makes, each through the pointer in global
# HOOK_PREFIX + symbol (passes/lower_cuda_host.py defines them, runtime/host_program.py
# fills them).
HOOK_PREFIX = "__adjit_hook_"
ALLOC_SYMBOL = "_mlir_memref_to_llvm_alloc"
FREE_SYMBOL = "_mlir_memref_to_llvm_free"
LAUNCH_SYMBOL = "__adjit_cuda_launch"
