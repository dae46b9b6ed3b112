// A launch's per-item tape inside a loop is kept in place (tape.py, launch.py): the augmented
// kernel writes it into a view of the in-place stack at the stack's size, the index stack
// keeps that offset, and the reverse kernel reads a view of the same buffer at the offset it
// pops. Neither pass allocates a tape per step nor copies one onto the stack or off it (it
// was: alloc, launch, a loop of loads and stores onto the f32 stack; in reverse an alloc and
// a loop copying it back, per step).
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s
func.func private @react(%x: memref<?xf32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.global_id"() {dim = 0 : i64} : () -> index
  %c = memref.load %x[%i] : memref<?xf32>
  %k = arith.constant 0.05 : f32
  %one = arith.constant 1.0 : f32
  %a = arith.mulf %k, %c : f32
  %b = arith.subf %one, %c : f32
  %p = arith.mulf %a, %b : f32
  %r = arith.addf %c, %p : f32
  memref.store %r, %x[%i] : memref<?xf32>
  return
}
func.func @steps(%x: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = memref.dim %x, %c0 : memref<?xf32>
  scf.for %t = %c0 to %n step %c1 {
    "adj.launch"(%m) ({
      func.call @react(%x) : (memref<?xf32>) -> ()
      gpu.yield
    }) {kernel = @react} : (index) -> ()
  }
  return
}
"adj.autodiff"() {sym_name = "grad", fn = @steps, mode = "reverse", activity = ["dup", "const"], ret_activity = "const"} : () -> ()

// CHECK-LABEL: func.func @grad_aug(
// CHECK-SAME: -> (memref<?xindex>, index, memref<?xf32>, index)
// CHECK-SAME: {holds = "f32 arrays kept in place {{.*}}", type = memref<?xf32>}
// CHECK: %[[BUF0:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: scf.for %{{.*}} iter_args(%[[IDX:[a-z0-9_]+]] = %{{.*}}, %[[ISIZE:[a-z0-9_]+]] = %{{.*}}, %[[BUF:[a-z0-9_]+]] = %[[BUF0]], %[[SIZE:[a-z0-9_]+]] = %{{.*}})
// The room for this launch's items, reserved once for all the steps (the loop's runs left).
// CHECK: %[[NEED:.*]] = arith.addi %[[SIZE]], %[[N:.*]] : index
// CHECK: %[[ROOM:.*]] = scf.if %{{.*}} -> (memref<?xf32>) {
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[BUF]] : memref<?xf32>
// CHECK: %[[VIEW:.*]] = memref.subview %[[ROOM]][%[[SIZE]]] [%[[N]]] [1] : memref<?xf32> to memref<?xf32, strided<[1], offset: ?>>
// CHECK-NOT: memref.alloc
// CHECK: "adj.launch"
// CHECK-NEXT: func.call @__adj_react_rev_d_c_o1_aug(%{{.*}}, %{{.*}}, %[[VIEW]])
// CHECK-NOT: memref.load %{{.*}} : memref<?xf32>
// CHECK-NOT: memref.store %{{.*}} : memref<?xf32>
// The offset goes on the index stack.
// CHECK: memref.store %[[SIZE]], %{{.*}}[%[[ISIZE]]] : memref<?xindex>
// CHECK: scf.yield %{{.*}}, %{{.*}}, %[[ROOM]], %[[NEED]]
// CHECK: return

// CHECK-LABEL: func.func @grad_rev(
// CHECK-SAME: %[[ISTACK:[a-z0-9_]+]]: memref<?xindex>, %{{.*}}: index, %[[REGION:[a-z0-9_]+]]: memref<?xf32>, %{{.*}}: index)
// CHECK: scf.for
// CHECK: %[[OFF:.*]] = memref.load %[[ISTACK]][%{{.*}}] : memref<?xindex>
// CHECK-NOT: memref.alloc
// CHECK: %[[RVIEW:.*]] = memref.subview %[[REGION]][%[[OFF]]] [%{{.*}}] [1] : memref<?xf32> to memref<?xf32, strided<[1], offset: ?>>
// CHECK-NOT: memref.alloc
// CHECK: "adj.launch"
// CHECK-NEXT: func.call @__adj_react_rev_d_c_o1_rev(%{{.*}}, %{{.*}}, %[[RVIEW]])
// CHECK: return
