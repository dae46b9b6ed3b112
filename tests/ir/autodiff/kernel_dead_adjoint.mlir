// The reverse kernel reads the adjoint of each element the kernel stores, then zeroes it for
// what reads the shadow next (memory_ops.reverse_store). When nothing reads the shadow after
// the launch's reverse (memory.shadow_dead_after: the output is an array the function
// allocates, touched before the launch by nothing but its allocation, the launch not in a
// loop), the launch calls a copy of the reverse kernel without that store
// (memory.without_dead_zeroing): one pass of writes over the output fewer.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s
func.func private @square(%x: memref<?xf32>, %y: memref<?xf32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.global_id"() {dim = 0 : i64} : () -> index
  %v = memref.load %x[%i] : memref<?xf32>
  %s = arith.mulf %v, %v : f32
  memref.store %s, %y[%i] : memref<?xf32>
  return
}
func.func @loss(%x: memref<?xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %y = memref.alloc(%n) : memref<?xf32>
  "adj.launch"(%n) ({
    func.call @square(%x, %y) : (memref<?xf32>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @square} : (index) -> ()
  %zero = arith.constant 0.0 : f32
  %s = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f32) {
    %v = memref.load %y[%k] : memref<?xf32>
    %a = arith.addf %acc, %v : f32
    scf.yield %a : f32
  }
  return %s : f32
}
"adj.autodiff"() {sym_name = "grad", fn = @loss, mode = "reverse", activity = ["dup"], ret_activity = "active"} : () -> ()

// The reverse kernel itself keeps its zeroing (a kernel derivative by name, or another launch,
// may need it).
// CHECK-LABEL: func.func private @__adj_square_rev_dd_c_rev(
// CHECK-SAME: %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %[[DY:[a-z0-9_]+]]: memref<?xf32>
// CHECK: memref.load %[[DY]]
// CHECK: memref.store %{{.*}}, %[[DY]]
// CHECK: return
// The copy the launch calls reads the adjoint and stores nothing into it.
// CHECK-LABEL: func.func private @__adj_square_rev_dd_c_rev__dead3(
// CHECK-SAME: %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %[[DY2:[a-z0-9_]+]]: memref<?xf32>
// CHECK: memref.load %[[DY2]]
// CHECK-NOT: memref.store %{{.*}}, %[[DY2]]
// CHECK: return
// CHECK-LABEL: func.func @grad_rev(
// CHECK: func.call @__adj_square_rev_dd_c_rev__dead3(

// A second launch over the same output: its reverse runs first and the first launch's reverse
// reads the shadow after it (it must read 0: the first values were overwritten), so the
// second launch's reverse kernel keeps its zeroing; the first one's (the last to read the
// shadow) drops it.
func.func @twice(%x: memref<?xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %y = memref.alloc(%n) : memref<?xf32>
  "adj.launch"(%n) ({
    func.call @square(%x, %y) : (memref<?xf32>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @square} : (index) -> ()
  "adj.launch"(%n) ({
    func.call @square(%x, %y) : (memref<?xf32>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @square} : (index) -> ()
  %v = memref.load %y[%c0] : memref<?xf32>
  return %v : f32
}
"adj.autodiff"() {sym_name = "grad2", fn = @twice, mode = "reverse", activity = ["dup"], ret_activity = "active"} : () -> ()
// CHECK-LABEL: func.func @grad2_rev(
// CHECK: func.call @__adj_square_rev_dd_c_rev(
// CHECK: func.call @__adj_square_rev_dd_c_o01_rev__dead3(
