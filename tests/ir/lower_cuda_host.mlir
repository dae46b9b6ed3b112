// --adj-lower-cuda-host: in a function run with device="cuda", a launch becomes a call of a
// launcher that calls the runtime's launch hook with the kernel's slot, the kernel's
// parameters packed as 64-bit words (a memref as aligned, aligned, offset, sizes, strides; an
// f32 as its bits, zero-extended; then the ndrange), the number of words, the work items and
// the block size.
// RUN: adjit-opt %s --adj-lower-cuda-host | FileCheck %s --implicit-check-not='"adj.launch'
// The whole host program's lowering (pipeline.cuda_host_pipeline, both halves, as the
// runtime runs them around the kernels' PTX compilation): the runtime calls become hooks.
// RUN: adjit-opt %s --pass-pipeline='builtin.module(adj-lower-cuda-host,adj-lower-cpu{threads=1},adj-privatize-helpers,inline,symbol-dce,canonicalize,convert-scf-to-cf,expand-strided-metadata,finalize-memref-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,convert-func-to-llvm,convert-cf-to-llvm,reconcile-unrealized-casts,adj-hook-runtime-calls)' \
// RUN:   | FileCheck %s --check-prefix=HOST

// The launched kernels, in slot order, for the PTX compilation that follows.
// CHECK: module attributes {adj.cuda_slots = ["k", "one_d"]}
// HOST: module attributes {{{.*}}adj.runtime_hooks = ["__adjit_hook___adjit_cuda_launch"]
// HOST: llvm.mlir.global external @__adjit_hook___adjit_cuda_launch()
// HOST: llvm.func @__adjit_cuda_launch(
// HOST: llvm.load {{.*}} -> !llvm.ptr

// The kernels stay: their PTX is compiled from this module.
// CHECK-LABEL: func.func @k(
func.func @k(%x: memref<?x?xf32>, %a: f32) attributes {adj.kernel, adj.ndim = 2 : i64} {
  return
}

// CHECK-LABEL: func.func @one_d(
func.func @one_d(%x: memref<?xf64>) attributes {adj.kernel, adj.ndim = 1 : i64} {
  return
}

// The launch sites call a launcher per kernel and block size.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: memref<?x?xf32>, %[[Y:.*]]: memref<?xf64>, %[[A:.*]]: f32, %[[N:.*]]: index, %[[STEPS:.*]]: index)
func.func @main(%x: memref<?x?xf32>, %y: memref<?xf64>, %a: f32, %n: index, %steps: index) attributes {adj.entry, llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // CHECK: scf.for
  scf.for %t = %c0 to %steps step %c1 {
    // CHECK-NEXT: func.call @[[K64:__adjit_launch__k__b64]](%[[X]], %[[A]], %[[N]], %[[N]])
    "adj.launch"(%n, %n) ({
      func.call @k(%x, %a) : (memref<?x?xf32>, f32) -> ()
      gpu.yield
    }) {kernel = @k, workgroupsize = array<i64: 8, 8>} : (index, index) -> ()
    // CHECK-NEXT: func.call @[[ONE:__adjit_launch__one_d__b256]](%[[Y]], %[[N]])
    "adj.launch"(%n) ({
      func.call @one_d(%y) : (memref<?xf64>) -> ()
      gpu.yield
    }) {kernel = @one_d} : (index) -> ()
    // The same kernel with another block size: another launcher, the same slot.
    // CHECK-NEXT: func.call @[[K256:__adjit_launch__k__b256]](%[[X]], %[[A]], %[[N]], %[[N]])
    "adj.launch"(%n, %n) ({
      func.call @k(%x, %a) : (memref<?x?xf32>, f32) -> ()
      gpu.yield
    }) {kernel = @k} : (index, index) -> ()
  }
  return
}

// Its words in a stack slot of its own (no_inline: MLIR's inliner would put the slot in the
// loop): the memref as aligned, aligned, offset, sizes, strides; the f32 as its bits; the
// ndrange. Then slot 0, the words, 10 of them, n*n items, 64 threads a block.
// CHECK: func.func private @[[K64]](%[[KX:.*]]: memref<?x?xf32>, %[[KA:.*]]: f32, %[[N0:.*]]: index, %[[N1:.*]]: index) attributes {no_inline}
// CHECK: %[[PX:.*]] = memref.extract_aligned_pointer_as_index %[[KX]]
// CHECK: %[[PX64:.*]] = arith.index_cast %[[PX]] : index to i64
// CHECK: %[[BASE:.*]], %[[OFF:.*]], %[[SIZES:.*]]:2, %[[STRIDES:.*]]:2 = memref.extract_strided_metadata %[[KX]]
// CHECK: %[[ABITS:.*]] = arith.bitcast %[[KA]] : f32 to i32
// CHECK: %[[AWORD:.*]] = arith.extui %[[ABITS]] : i32 to i64
// CHECK: %[[W:.*]] = memref.alloca() : memref<10xi64>
// CHECK: memref.store %[[PX64]], %[[W]][%{{.*}}] : memref<10xi64>
// CHECK: memref.store %[[PX64]], %[[W]]
// CHECK: memref.store %[[AWORD]], %[[W]]
// CHECK: %[[ITEMS:.*]] = arith.muli %[[N0]], %[[N1]] : index
// CHECK: %[[SLOT0:.*]] = arith.constant 0 : i64
// CHECK: %[[PW:.*]] = memref.extract_aligned_pointer_as_index %[[W]]
// CHECK: %[[PW64:.*]] = arith.index_cast %[[PW]] : index to i64
// CHECK: %[[NW:.*]] = arith.constant 10 : i64
// CHECK: %[[ITEMS64:.*]] = arith.index_cast %[[ITEMS]] : index to i64
// CHECK: %[[BLOCK:.*]] = arith.constant 64 : i64
// CHECK: call @__adjit_cuda_launch(%[[SLOT0]], %[[PW64]], %[[NW]], %[[ITEMS64]], %[[BLOCK]])

// The 1-D kernel takes slot 1; 6 words: 5 for the 1-D memref, 1 for the ndrange.
// CHECK: func.func private @[[ONE]](
// CHECK: memref.alloca() : memref<6xi64>
// CHECK: %[[SLOT1:.*]] = arith.constant 1 : i64
// CHECK: %[[NW1:.*]] = arith.constant 6 : i64
// CHECK: %[[BLOCK1:.*]] = arith.constant 256 : i64
// CHECK: call @__adjit_cuda_launch(%[[SLOT1]], %{{.*}}, %[[NW1]], %{{.*}}, %[[BLOCK1]])

// CHECK: func.func private @[[K256]](
// CHECK: %[[AGAIN:.*]] = arith.constant 0 : i64
// CHECK: call @__adjit_cuda_launch(%[[AGAIN]]

// CHECK: func.func private @__adjit_cuda_launch(i64, i64, i64, i64, i64)
