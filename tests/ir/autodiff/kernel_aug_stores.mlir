// The augmented kernel stores its tape unconditionally (kernel_tape.py hoist_tape_stores), and
// an augmented launch passes the primal array in place of a shadow its kernel ignores
// (augment.py aug_shadow, reads_values) rather than a freshly zeroed array.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

// A guarded in-place update: its reverse needs the old v[i], saved on one branch only.
func.func private @step(%v: memref<?xf32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.global_id"() {dim = 0 : i64} : () -> index
  %c0 = arith.constant 0 : index
  %inside = arith.cmpi sgt, %i, %c0 : index
  scf.if %inside {
    %c = memref.load %v[%i] : memref<?xf32>
    %sq = arith.mulf %c, %c : f32
    memref.store %sq, %v[%i] : memref<?xf32>
  }
  return
}

// v is a local array: its shadow exists only in the reverse pass.
func.func @run(%u: memref<?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %u, %c0 : memref<?xf32>
  %v = memref.alloc(%n) : memref<?xf32>
  memref.copy %u, %v : memref<?xf32> to memref<?xf32>
  "adj.launch"(%n) ({
    func.call @step(%v) : (memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @step} : (index) -> ()
  memref.copy %v, %out : memref<?xf32> to memref<?xf32>
  return
}
"adj.autodiff"() {sym_name = "d", fn = @run, mode = "reverse", activity = ["dup", "dup"], ret_activity = "const"} : () -> ()

// The store of the tape slot comes after the scf.if, which yields u[i] or 0:
// CHECK-LABEL: func.func private @{{.*}}step{{.*}}_aug(
// CHECK-SAME:    %[[U:[a-z0-9]+]]: memref<?xf32>, %{{.*}}: memref<?xf32>, %[[TAPE:[a-z0-9]+]]: memref<?xf32, strided<[1], offset: ?>>)
// CHECK:         %[[SAVED:.*]] = scf.if %{{.*}} -> (f32) {
// CHECK:           %[[C:.*]] = memref.load %[[U]]
// CHECK-NOT:       memref.store %{{.*}}, %[[TAPE]]
// CHECK:           scf.yield %[[C]] : f32
// CHECK:         } else {
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:           scf.yield %[[Z]] : f32
// CHECK:         }
// CHECK:         memref.store %[[SAVED]], %[[TAPE]][%{{.*}}]
// CHECK-NEXT:    return

// The augmented launch gets v twice: as the primal and in place of its shadow, which the
// augmented kernel ignores.
// CHECK-LABEL: func.func @d_aug(
// CHECK:         %[[V:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK:         %[[T:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK-NOT:     memref.alloc
// CHECK:         %[[TV:.*]] = memref.cast %[[T]] : memref<?xf32> to memref<?xf32, strided<[1], offset: ?>>
// CHECK:         "adj.launch"
// CHECK-NEXT:      func.call @{{.*}}step{{.*}}_aug(%[[V]], %[[V]], %[[TV]])
