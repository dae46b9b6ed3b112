// GPU lowering of adj.check (passes/lower_gpu.py): a kernel with checks takes its launch's
// error cell as a hidden last parameter (a memref<1xi64>: 5 words after the arguments and
// the extents) and stores the failed check's number there; no module global, which
// concurrent launches would share. A kernel without checks keeps its parameters.
// RUN: adjit-opt %s --emit=ptx | FileCheck %s

// CHECK-NOT: .global .align {{.*}}__adj_error
// CHECK-LABEL: .visible .entry checked(
// x: memref<?xf32> (allocated, aligned, offset, size, stride), n, the extent
// CHECK-NEXT: .param .u64 .ptr .align 1 checked_param_0,
// CHECK-NEXT: .param .u64 .ptr .align 1 checked_param_1,
// CHECK-NEXT: .param .u64 checked_param_2,
// CHECK-NEXT: .param .u64 checked_param_3,
// CHECK-NEXT: .param .u64 checked_param_4,
// CHECK-NEXT: .param .u64 checked_param_5,
// CHECK-NEXT: .param .u64 checked_param_6,
// the error cell
// CHECK-NEXT: .param .u64 .ptr .align 1 checked_param_7,
// CHECK-NEXT: .param .u64 .ptr .align 1 checked_param_8,
// CHECK-NEXT: .param .u64 checked_param_9,
// CHECK-NEXT: .param .u64 checked_param_10,
// CHECK-NEXT: .param .u64 checked_param_11
// CHECK-NEXT: )
// CHECK: ld.param.b64 [[RAW:%rd[0-9]+]], [checked_param_8];
// CHECK: cvta.to.global.u64 [[CELL:%rd[0-9]+]], [[RAW]];
// CHECK: setp.ne.b64
// check number 1, as two 32-bit halves
// CHECK: st.global.b32 [[[CELL]]+4], 0;
// CHECK-NEXT: st.global.b32 [[[CELL]]], 1;
// CHECK: ret;

// CHECK-LABEL: .visible .entry unchecked(
// CHECK-COUNT-6: .param
// CHECK-NEXT: )
func.func @checked(%x: memref<?xf32>, %n: i64) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : i64
  %ok = arith.cmpi ne, %n, %c0 : i64
  "adj.check"(%ok) {error = "ZeroDivisionError", message = "integer division by zero"} : (i1) -> ()
  %v = memref.load %x[%i] : memref<?xf32>
  %w = arith.addf %v, %v : f32
  memref.store %w, %x[%i] : memref<?xf32>
  return
}

func.func @unchecked(%x: memref<?xf32>) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %v = memref.load %x[%i] : memref<?xf32>
  %w = arith.addf %v, %v : f32
  memref.store %w, %x[%i] : memref<?xf32>
  return
}
