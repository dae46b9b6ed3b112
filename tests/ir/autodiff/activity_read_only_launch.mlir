// Activity through launches and calls (activity.py): an array the callee only reads keeps its
// own activity. %x and %y are Const and the kernel only reads them, so with Active %a only
// %out (written) is varied and gets a shadow: the launch's kernel derivative is "aacd" (no
// shadows of %x, %y: neither zero-filled buffers nor reverse adds into them). A call of a
// function that writes its argument still varies it (@fill: "dup" for its array).
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func private @k(%a: f32, %x: memref<?xf32>, %y: memref<?xf32>, %out: memref<?xf32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %xi = memref.load %x[%i] : memref<?xf32>
  %yi = memref.load %y[%i] : memref<?xf32>
  %ax = arith.mulf %a, %xi : f32
  %r = arith.subf %ax, %yi : f32
  %r2 = arith.mulf %r, %r : f32
  memref.store %r2, %out[%i] : memref<?xf32>
  return
}
func.func @run(%a: f32, %x: memref<?xf32>, %y: memref<?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  "adj.launch"(%n) ({
    func.call @k(%a, %x, %y, %out) : (f32, memref<?xf32>, memref<?xf32>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}
"adj.autodiff"() {sym_name = "grad", fn = @run, mode = "reverse", activity = ["active", "const", "const", "dup"], ret_activity = "const"} : () -> ()

// CHECK-LABEL: func.func private @__adj_k_rev_accd_c_rev(
// CHECK-NOT: func.func
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<?xf32>
// CHECK-LABEL: func.func @grad_aug(
// CHECK-SAME: %{{[a-z0-9]+}}: f32, %[[X:[a-z0-9]+]]: memref<?xf32>, %[[Y:[a-z0-9]+]]: memref<?xf32>, %[[OUT:[a-z0-9]+]]: memref<?xf32>, %[[DOUT:[a-z0-9]+]]: memref<?xf32>)
// CHECK-NOT: memref.alloc
// CHECK: func.call @__adj_k_rev_accd_c_aug(%{{.*}}, %[[X]], %[[Y]], %[[OUT]], %[[DOUT]])
// The one buffer of the reverse: %a's per-item adjoints.
// CHECK-LABEL: func.func @grad_rev(
// CHECK-SAME: %{{[a-z0-9]+}}: f32, %[[X:[a-z0-9]+]]: memref<?xf32>, %[[Y:[a-z0-9]+]]: memref<?xf32>, %[[OUT:[a-z0-9]+]]: memref<?xf32>, %[[DOUT:[a-z0-9]+]]: memref<?xf32>)
// CHECK-NOT: memref.alloc
// CHECK: %[[BA:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK-NOT: memref.alloc
// CHECK: func.call @__adj_k_rev_accd_c_rev(%{{.*}}, %[[X]], %[[Y]], %[[OUT]], %[[DOUT]], %[[BA]])

// y[i] = c * x[i] through a call that writes y: y is varied by it, x (only read) is not.
func.func private @scale(%c: f64, %x: memref<?xf64>, %y: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %xi = memref.load %x[%c0] : memref<?xf64>
  %v = arith.mulf %c, %xi : f64
  memref.store %v, %y[%c0] : memref<?xf64>
  return
}
func.func @caller(%c: f64, %x: memref<?xf64>, %y: memref<?xf64>) {
  func.call @scale(%c, %x, %y) : (f64, memref<?xf64>, memref<?xf64>) -> ()
  return
}
"adj.autodiff"() {sym_name = "dcaller", fn = @caller, mode = "reverse", activity = ["active", "const", "dup"], ret_activity = "const"} : () -> ()
// CHECK-LABEL: func.func @dcaller_rev(
// CHECK: call @__adj_scale_rev_acd
