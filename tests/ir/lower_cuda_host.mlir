// --adj-lower-cuda-host: in a function run with device="cuda", a launch becomes a call of the
// runtime's launch hook with the kernel's slot, the kernel's parameters packed as 64-bit
// words (a memref as aligned, aligned, offset, sizes, strides; an f32 as its bits, zero-
// extended; then the ndrange), the number of words, the work items and the block size. The
// words live in a stack slot made once, in the entry block, not in the loop.
// RUN: adjit-opt %s --adj-lower-cuda-host | FileCheck %s --implicit-check-not='"adj.launch'

// The kernels stay: their PTX is compiled from this module.
// CHECK-LABEL: func.func @k(
func.func @k(%x: memref<?x?xf32>, %a: f32) attributes {adj.kernel, adj.ndim = 2 : i64} {
  return
}

// CHECK-LABEL: func.func @one_d(
func.func @one_d(%x: memref<?xf64>) attributes {adj.kernel, adj.ndim = 1 : i64} {
  return
}

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: memref<?x?xf32>, %[[Y:.*]]: memref<?xf64>, %[[A:.*]]: f32, %[[N:.*]]: index, %[[STEPS:.*]]: index)
func.func @main(%x: memref<?x?xf32>, %y: memref<?xf64>, %a: f32, %n: index, %steps: index) attributes {adj.entry, llvm.emit_c_interface} {
  // One slot per launch site, each put first in the entry block (so the last comes first).
  // CHECK: memref.alloca() : memref<10xi64>
  // CHECK-NEXT: %[[W1:.*]] = memref.alloca() : memref<6xi64>
  // CHECK-NEXT: %[[W0:.*]] = memref.alloca() : memref<10xi64>
  // CHECK: scf.for
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %t = %c0 to %steps step %c1 {
    // CHECK: %[[PX:.*]] = memref.extract_aligned_pointer_as_index %[[X]]
    // CHECK: %[[PX64:.*]] = arith.index_cast %[[PX]] : index to i64
    // CHECK: %[[BASE:.*]], %[[OFF:.*]], %[[SIZES:.*]]:2, %[[STRIDES:.*]]:2 = memref.extract_strided_metadata %[[X]]
    // CHECK: %[[ABITS:.*]] = arith.bitcast %[[A]] : f32 to i32
    // CHECK: %[[AWORD:.*]] = arith.extui %[[ABITS]] : i32 to i64
    // CHECK: memref.store %[[PX64]], %[[W0]][%{{.*}}] : memref<10xi64>
    // CHECK: memref.store %[[PX64]], %[[W0]]
    // CHECK: memref.store %[[AWORD]], %[[W0]]
    // CHECK: %[[ITEMS:.*]] = arith.muli %[[N]], %[[N]] : index
    // CHECK: %[[SLOT0:.*]] = arith.constant 0 : i64
    // CHECK: %[[PW:.*]] = memref.extract_aligned_pointer_as_index %[[W0]]
    // CHECK: %[[PW64:.*]] = arith.index_cast %[[PW]] : index to i64
    // CHECK: %[[NW:.*]] = arith.constant 10 : i64
    // CHECK: %[[ITEMS64:.*]] = arith.index_cast %[[ITEMS]] : index to i64
    // CHECK: %[[BLOCK:.*]] = arith.constant 64 : i64
    // CHECK: func.call @__adjit_cuda_launch(%[[SLOT0]], %[[PW64]], %[[NW]], %[[ITEMS64]], %[[BLOCK]])
    "adj.launch"(%n, %n) ({
      func.call @k(%x, %a) : (memref<?x?xf32>, f32) -> ()
      gpu.yield
    }) {kernel = @k, workgroupsize = array<i64: 8, 8>} : (index, index) -> ()
    // A second kernel takes slot 1; 6 words: 5 for the 1-D memref, 1 for the ndrange.
    // CHECK: memref.store %{{.*}}, %[[W1]]
    // CHECK: %[[SLOT1:.*]] = arith.constant 1 : i64
    // CHECK: %[[NW1:.*]] = arith.constant 6 : i64
    // CHECK: %[[BLOCK1:.*]] = arith.constant 256 : i64
    // CHECK: func.call @__adjit_cuda_launch(%[[SLOT1]], %{{.*}}, %[[NW1]], %{{.*}}, %[[BLOCK1]])
    "adj.launch"(%n) ({
      func.call @one_d(%y) : (memref<?xf64>) -> ()
      gpu.yield
    }) {kernel = @one_d} : (index) -> ()
    // The first kernel again: slot 0.
    // CHECK: %[[AGAIN:.*]] = arith.constant 0 : i64
    // CHECK: func.call @__adjit_cuda_launch(%[[AGAIN]]
    "adj.launch"(%n, %n) ({
      func.call @k(%x, %a) : (memref<?x?xf32>, f32) -> ()
      gpu.yield
    }) {kernel = @k} : (index, index) -> ()
  }
  return
}

// CHECK: func.func private @__adjit_cuda_launch(i64, i64, i64, i64, i64)
