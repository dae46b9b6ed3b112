// Tape roots, not derived values (issue 9 item 4): an in-place reaction step
// x[i] = x[i] + 0.05 * x[i] * (1 - x[i]). The load of x[i] cannot be repeated in reverse
// (the kernel overwrites x[i]), and the product's rule needs both factors, 0.05 * c and
// 1 - c. Each is cheap arithmetic of the one value c, so the kernel tapes c (one f32 slot per
// item) and the reverse kernel recomputes both factors from it, where it taped both (two).
// y[i] = exp(y[i]) in place: exp's rule reads its result, a math op of one root that is not
// taped anyway, so the result stays taped (recomputing exp costs more than its slot).
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func private @react(%x: memref<?xf32>, %y: memref<?xf32>)
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
  %d = memref.load %y[%i] : memref<?xf32>
  %e = math.exp %d : f32
  memref.store %e, %y[%i] : memref<?xf32>
  return
}
func.func @step(%x: memref<?xf32>, %y: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  "adj.launch"(%n) ({
    func.call @react(%x, %y) : (memref<?xf32>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @react} : (index) -> ()
  return
}
"adj.autodiff"() {sym_name = "grad", fn = @step, mode = "reverse", activity = ["dup", "dup"], ret_activity = "const"} : () -> ()

// Two f32 slots per item: exp's result and the load of x[i] (the root); not 0.05 * c nor
// 1 - c.
// CHECK-LABEL: func.func private @__adj_react_rev_dd_c_aug(
// CHECK-SAME: adj.tape = [{holds = "f32 values per work item: result of math.exp {{[^;]*}}; result of memref.load {{[^;]*}}", per_item = 2 : i64, type = memref<?xf32, strided<[1], offset: ?>>}]
// CHECK: return

// The reverse kernel reads the root from the tape and recomputes both factors from it.
// CHECK-LABEL: func.func private @__adj_react_rev_dd_c_rev(
// CHECK-SAME: %[[TAPE:[a-z0-9]+]]: memref<?xf32, strided<[1], offset: ?>>)
// CHECK: memref.load %[[TAPE]][%{{.*}}] : memref<?xf32, strided<[1], offset: ?>>
// CHECK: %[[C:.*]] = memref.load %[[TAPE]][%{{.*}}] : memref<?xf32, strided<[1], offset: ?>>
// CHECK-NEXT: arith.subf %{{.*}}, %[[C]] : f32
// CHECK: arith.mulf %{{.*}}, %[[C]] : f32
// CHECK: return
