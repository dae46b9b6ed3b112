// Kernel launches under differentiation: forward kernels; augmented kernels that fill a
// per-item tape (prod(ndrange) * per_item slots); reverse kernels, then adj.sync; adjoints of
// active scalar arguments written per item and summed.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func private @saxpy(%a: f32, %x: memref<?xf32>, %y: memref<?xf32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %xi = memref.load %x[%i] : memref<?xf32>
  %yi = memref.load %y[%i] : memref<?xf32>
  %ax = arith.mulf %a, %xi : f32
  %t = math.tanh %yi : f32
  %r = arith.addf %ax, %t : f32
  memref.store %r, %y[%i] : memref<?xf32>
  return
}
func.func @run(%a: f32, %x: memref<?xf32>, %y: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  "adj.launch"(%n) ({
    func.call @saxpy(%a, %x, %y) : (f32, memref<?xf32>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @saxpy, workgroupsize = array<i64: 64>} : (index) -> ()
  return
}
"adj.autodiff"() {sym_name = "fwd", fn = @run, mode = "forward", activity = ["dup", "dup", "dup"], ret_activity = "const"} : () -> ()
"adj.autodiff"() {sym_name = "grad", fn = @run, mode = "reverse", activity = ["active", "dup", "dup"], ret_activity = "const"} : () -> ()

// CHECK-LABEL: func.func @fwd(
// CHECK: "adj.launch"(%{{.*}}) ({
// CHECK-NEXT: func.call @[[FK:__adj_saxpy_fwd_ddd_c]](
// CHECK: }) {kernel = @[[FK]], workgroupsize = array<i64: 64>} : (index) -> ()

// The augmented kernel stores its item's y[i] (tanh's derivative, sech^2, is computed from
// tanh's operand; y[i] is overwritten by the store) at slot item * 1 + 0.
// CHECK-LABEL: func.func private @__adj_saxpy_rev_add_c_aug(
// CHECK-SAME: %{{[a-z0-9]+}}: f32, %{{[a-z0-9]+}}: memref<?xf32>, %{{[a-z0-9]+}}: memref<?xf32>, %[[Y:[a-z0-9]+]]: memref<?xf32>, %{{[a-z0-9]+}}: memref<?xf32>, %[[TAPE:[a-z0-9]+]]: memref<?xf32, strided<[1], offset: ?>>) attributes {adj.kernel, adj.ndim = 1 : i64, adj.tape = [{holds = "f32 values per work item: result of memref.load {{.*}}", per_item = 1 : i64, type = memref<?xf32, strided<[1], offset: ?>>}]}
// CHECK: %[[ITEM:.*]] = "adj.index"()
// CHECK: %[[T:.*]] = memref.load %[[Y]]
// CHECK: math.tanh %[[T]]
// CHECK: memref.store %{{.*}}, %[[Y]]
// CHECK: %[[SLOT0:.*]] = arith.muli %[[ITEM]], %{{.*}} : index
// CHECK: %[[SLOT:.*]] = arith.addi %[[SLOT0]], %{{.*}} : index
// CHECK: memref.store %[[T]], %[[TAPE]][%[[SLOT]]] : memref<?xf32, strided<[1], offset: ?>>

// The reverse kernel reads its slot (y[i] as it was), takes tanh's derivative from it
// (4t / (1 + t)^2, t = exp(-2|y[i]|)), adds into x's shadow at the item's own element with a
// plain load/add/store (every access to dx is at [adj.index]: no other item touches the
// element, gather.own_elements), and writes its share of a's adjoint at [adj.index].
// CHECK-LABEL: func.func private @__adj_saxpy_rev_add_c_rev(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?xf32>, %[[DX:[a-z0-9]+]]: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %[[TAPE:[a-z0-9]+]]: memref<?xf32, strided<[1], offset: ?>>, %[[DA:[a-z0-9]+]]: memref<?xf32>)
// CHECK: %[[ITEM:.*]] = "adj.index"()
// CHECK: %[[T:.*]] = memref.load %[[TAPE]]
// CHECK: math.absf %[[T]] : f32
// CHECK-NOT: memref.atomic_rmw
// CHECK: %[[OLD:.*]] = memref.load %[[DX]][%{{.*}}] : memref<?xf32>
// CHECK: %[[NEW:.*]] = arith.addf %[[OLD]], %{{.*}} : f32
// CHECK: memref.store %[[NEW]], %[[DX]][%{{.*}}] : memref<?xf32>
// CHECK-NOT: memref.atomic_rmw
// CHECK: memref.store %{{.*}}, %[[DA]][%[[ITEM]]] : memref<?xf32>

// The augmented pass allocates n * 1 slots, launches the augmented kernel on the buffer (as
// the kernel's view type) and returns the per-item tape as its own tape value: at the top
// level, a buffer of its own (in a loop it would be kept in place: tape_in_place.mlir).
// CHECK-LABEL: func.func @grad_aug(
// CHECK-SAME: %[[A:[a-z0-9]+]]: f32, %[[X:[a-z0-9]+]]: memref<?xf32>, %[[DX:[a-z0-9]+]]: memref<?xf32>, %[[Y:[a-z0-9]+]]: memref<?xf32>, %[[DY:[a-z0-9]+]]: memref<?xf32>) -> memref<?xf32>
// CHECK-SAME: adj.tape = [{holds = "tape value 0 of adj.launch {{.*}}", type = memref<?xf32>}]
// CHECK: %[[N:.*]] = memref.dim %[[X]]
// CHECK: %[[ITEMS:.*]] = arith.muli %{{.*}}, %[[N]] : index
// CHECK: %[[SLOTS:.*]] = arith.muli %[[ITEMS]], %{{.*}} : index
// CHECK: %[[TAPE:.*]] = memref.alloc(%[[SLOTS]]) : memref<?xf32>
// CHECK: %[[VIEW:.*]] = memref.cast %[[TAPE]] : memref<?xf32> to memref<?xf32, strided<[1], offset: ?>>
// CHECK: "adj.launch"(%[[N]]) ({
// CHECK-NEXT: func.call @[[AK:__adj_saxpy_rev_add_c_aug]](%[[A]], %[[X]], %[[DX]], %[[Y]], %[[DY]], %[[VIEW]])
// CHECK: return %[[TAPE]] : memref<?xf32>

// The reverse pass: the reverse kernel with the tape and a per-item buffer for a's adjoint;
// the launch returns the buffer's sum over the items, a's adjoint (in f64, per chunk,
// pairwise: kernel_reductions.mlir, lower_cpu_item_sums.mlir).
// CHECK-LABEL: func.func @grad_rev(
// CHECK-SAME: %[[A:[a-z0-9]+]]: f32, %[[X:[a-z0-9]+]]: memref<?xf32>, %[[DX:[a-z0-9]+]]: memref<?xf32>, %[[Y:[a-z0-9]+]]: memref<?xf32>, %[[DY:[a-z0-9]+]]: memref<?xf32>, %[[TAPE:[a-z0-9]+]]: memref<?xf32>) -> f32
// CHECK: %[[VIEW:.*]] = memref.cast %[[TAPE]] : memref<?xf32> to memref<?xf32, strided<[1], offset: ?>>
// CHECK: %[[DA:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: %[[SUM:.*]] = "adj.launch"(%{{.*}}) ({
// CHECK-NEXT: func.call @[[RK:__adj_saxpy_rev_add_c_rev]](%[[A]], %[[X]], %[[DX]], %[[Y]], %[[DY]], %[[VIEW]], %[[DA]])
// CHECK: }) {kernel = @[[RK]], workgroupsize = array<i64: 64>} : (index) -> f64
// CHECK-NEXT: "adj.sync"() : () -> ()
// CHECK-NEXT: %[[DAS:.*]] = arith.truncf %[[SUM]] : f64 to f32
// CHECK-NEXT: return %[[DAS]] : f32
