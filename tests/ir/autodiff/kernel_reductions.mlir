// Sums over work items of per-item adjoints (passes/summation.py): the Active scalar
// %a and the element %p[0] that every item reads (uniform_loads.py). The reverse kernel stores
// its item's adjoint of each at [adj.index], with no atomic on %p's shadow; the reverse launch
// returns each buffer's sum over the items (adj.launch's results), and %p[0]'s is added into
// its shadow once, guarded by the element's bounds. The sums are f64 (float32 adjoints are
// summed in float64), rounded to f32 once. How the sums are computed is the
// lowering's: per chunk of items as they run on the CPU (lower_cpu_item_sums.mlir), over the
// filled buffers on the GPU (--adj-expand-item-sums, check prefix "SUMS"; 4096-item chunks in
// parallel, 4 reassociable f64 lanes each, the partials pairwise). %x[%i], read per item, is gathered (gather.py, no atomic;
// kernel_gather.mlir); the kernel requested by name keeps its atomic add.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s
// RUN: adjit-opt %s --adj-autodiff --adj-expand-item-sums | FileCheck %s --check-prefix=SUMS

func.func private @k(%a: f32, %p: memref<?xf32>, %x: memref<?xf32>, %y: memref<?xf32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %p0 = memref.load %p[%c0] : memref<?xf32>
  %xi = memref.load %x[%i] : memref<?xf32>
  %ax = arith.mulf %a, %xi : f32
  %r = arith.mulf %ax, %p0 : f32
  memref.store %r, %y[%i] : memref<?xf32>
  return
}
func.func @run(%a: f32, %p: memref<?xf32>, %x: memref<?xf32>, %y: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  "adj.launch"(%n) ({
    func.call @k(%a, %p, %x, %y) : (f32, memref<?xf32>, memref<?xf32>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}
"adj.autodiff"() {sym_name = "grad", fn = @run, mode = "reverse", activity = ["active", "dup", "dup", "dup"], ret_activity = "const"} : () -> ()
// The kernel's own derivative, requested by name (as the GPU launcher does), after the launch
// rule made one for the same signature: it keeps the ABI (one per-item buffer, for %a) and
// adds into %p's shadow atomically.
"adj.autodiff"() {sym_name = "dk", fn = @k, mode = "reverse", activity = ["active", "dup", "dup", "dup"], ret_activity = "const"} : () -> ()

// CHECK-LABEL: func.func private @__adj_k_rev_addd_c_rev(
// CHECK-SAME: %{{[a-z0-9]+}}: f32, %{{[a-z0-9]+}}: memref<?xf32>, %[[DP:[a-z0-9]+]]: memref<?xf32>, %{{[a-z0-9]+}}: memref<?xf32>, %[[DX:[a-z0-9]+]]: memref<?xf32>
// CHECK-SAME: %[[DA:[a-z0-9]+]]: memref<?xf32>, %[[DP0:[a-z0-9]+]]: memref<?xf32>)
// CHECK-NOT: memref.atomic_rmw
// CHECK: memref.store %{{.*}}, %[[DA]][%[[ITEM:.*]]] : memref<?xf32>
// CHECK-NEXT: memref.store %{{.*}}, %[[DP0]][%[[ITEM]]] : memref<?xf32>
// CHECK-NEXT: return

// CHECK-LABEL: func.func @grad_rev(
// CHECK-SAME: %{{[a-z0-9]+}}: f32, %{{[a-z0-9]+}}: memref<?xf32>, %[[DP:[a-z0-9]+]]: memref<?xf32>
// CHECK: %[[BA:.*]] = memref.alloc(%[[ITEMS:.*]]) : memref<?xf32>
// CHECK: %[[BP:.*]] = memref.alloc(%[[ITEMS]]) : memref<?xf32>
// CHECK: %[[S:.*]]:2 = "adj.launch"
// CHECK-NEXT: func.call @__adj_k_rev_addd_c_rev({{.*}}, %[[BA]], %[[BP]])
// CHECK: (index) -> (f64, f64)
// CHECK-NEXT: "adj.sync"() : () -> ()
// CHECK-NEXT: %[[SA:.*]] = arith.truncf %[[S]]#0 : f64 to f32
// CHECK-NEXT: %[[SP:.*]] = arith.truncf %[[S]]#1 : f64 to f32
// p[0]'s sum added into dp[0] if 0 is inside p.
// CHECK: %[[DIM:.*]] = memref.dim %[[DP]], %{{.*}} : memref<?xf32>
// CHECK: %[[IN:.*]] = arith.cmpi slt, %{{.*}}, %[[DIM]] : index
// CHECK: scf.if
// CHECK-NEXT: %[[OLD:.*]] = memref.load %[[DP]][%{{.*}}] : memref<?xf32>
// CHECK-NEXT: %[[NEW:.*]] = arith.addf %[[OLD]], %[[SP]] : f32
// CHECK-NEXT: memref.store %[[NEW]], %[[DP]][%{{.*}}] : memref<?xf32>
// CHECK: return %[[SA]] : f32

// The GPU's form: the launch fills the buffers, then a's sum: chunks in parallel, 4 f64 lanes,
// partials pairwise, then f32; then p[0]'s the same way, added into dp[0].
// SUMS-LABEL: func.func @grad_rev(
// SUMS-SAME: %{{[a-z0-9]+}}: f32, %{{[a-z0-9]+}}: memref<?xf32>, %[[DP:[a-z0-9]+]]: memref<?xf32>
// SUMS: %[[BA:.*]] = memref.alloc(%[[ITEMS:.*]]) : memref<?xf32>
// SUMS: %[[BP:.*]] = memref.alloc(%[[ITEMS]]) : memref<?xf32>
// SUMS: "adj.launch"
// SUMS-NEXT: func.call @__adj_k_rev_addd_c_rev({{.*}}, %[[BA]], %[[BP]])
// SUMS: (index) -> ()
// SUMS-NEXT: "adj.sync"() : () -> ()
// SUMS: %[[C4096:.*]] = arith.constant 4096 : index
// SUMS: %[[CHUNKS:.*]] = arith.ceildivui %{{.*}}, %[[C4096]] : index
// SUMS: %[[PART:.*]] = memref.alloc(%[[CHUNKS]]) : memref<?xf64>
// SUMS: scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[CHUNKS]])
// SUMS: scf.for {{.*}} iter_args({{.*}}) -> (f64, f64, f64, f64)
// SUMS: %[[V:.*]] = memref.load %[[BA]]
// SUMS: %[[W:.*]] = arith.extf %[[V]] : f32 to f64
// SUMS: arith.addf %{{.*}}, %[[W]] fastmath<reassoc> : f64
// SUMS: memref.store %{{.*}}, %[[PART]][%{{.*}}] : memref<?xf64>
// SUMS: scf.reduce
// SUMS: scf.while
// SUMS: memref.load %[[PART]]
// SUMS: memref.load %[[BP]]
// SUMS: %[[SA:.*]] = arith.truncf %{{.*}} : f64 to f32
// SUMS: %[[SP:.*]] = arith.truncf %{{.*}} : f64 to f32
// SUMS: scf.if
// SUMS-NEXT: %[[OLD:.*]] = memref.load %[[DP]][%{{.*}}] : memref<?xf32>
// SUMS-NEXT: %[[NEW:.*]] = arith.addf %[[OLD]], %[[SP]] : f32
// SUMS: return %[[SA]] : f32

// CHECK-LABEL: func.func @dk_rev(
// CHECK-SAME: %{{[a-z0-9]+}}: f32, %{{[a-z0-9]+}}: memref<?xf32>, %[[DP:[a-z0-9]+]]: memref<?xf32>, %{{[a-z0-9]+}}: memref<?xf32>, %{{[a-z0-9]+}}: memref<?xf32>, %{{[a-z0-9]+}}: memref<?xf32>, %{{[a-z0-9]+}}: memref<?xf32>, %[[DA:[a-z0-9]+]]: memref<?xf32>)
// CHECK: memref.atomic_rmw addf %{{.*}}, %[[DP]][%{{.*}}] : (f32, memref<?xf32>) -> f32
// CHECK: memref.store %{{.*}}, %[[DA]][%{{.*}}] : memref<?xf32>
// CHECK-NEXT: return
