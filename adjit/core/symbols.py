"""Symbol names that generated code and the runtime share."""

# A host program's entry function (api/cuda_jit.py, runtime/host_program.py).
ENTRY = "entry"
# The runtime calls a host program makes, each through the pointer in global
# HOOK_PREFIX + symbol (passes/lower_cuda_host.py defines them, runtime/host_program.py
# fills them).
HOOK_PREFIX = "__adjit_hook_"
ALLOC_SYMBOL = "_mlir_memref_to_llvm_alloc"
FREE_SYMBOL = "_mlir_memref_to_llvm_free"
LAUNCH_SYMBOL = "__adjit_cuda_launch"
# A copy of `bytes` contiguous bytes, (dst, src, bytes) as i64: each memref.copy of host code
# (cuMemcpy: device to device, or to and from host memory).
COPY_SYMBOL = "__adjit_cuda_copy"
# `bytes` of host memory (pinned) for an allocation marked HOST_MEMORY_ATTR (the working
# snapshots of a checkpointed loop with spill=True); FREE_SYMBOL frees it too.
HOST_ALLOC_SYMBOL = "__adjit_host_alloc"
HOST_MEMORY_ATTR = "adj.host_memory"
# The checkpointing schedule (runtime/native/checkpoint.cpp) that the reverse pass of a
# checkpointed loop calls (passes/autodiff/rules/checkpoint.py): CPU code finds these in the native
# extension by name; a host program calls them through hooks that the runtime fills with the
# extension's addresses.
CHECKPOINT_SYMBOLS = ("adj_ckpt_new", "adj_ckpt_next", "adj_ckpt_from", "adj_ckpt_to",
                      "adj_ckpt_slot", "adj_ckpt_free", "adj_ckpt_count")
# The matrix products of compiled code (runtime/native/gemm.cpp; compiler/matmul.py):
# (flags, A, B, C), three 3-D memrefs; through NumPy's OpenBLAS where the extension found it.
# CPU code finds them in the extension by name; a host program through hooks, like the
# checkpointing schedule's.
GEMM_SYMBOLS = ("adj_gemm_f32", "adj_gemm_f64")
