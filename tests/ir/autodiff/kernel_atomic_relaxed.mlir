// A kernel that reads %x[%idx[%i]]: which items read one element of %x is known only at run
// time, so the reverse kernel adds into %x's shadow atomically (no gather form: gather.py).
// A sum needs no ordering: the atomic is monotonic (lower_cpu.relax_atomics), never acq_rel,
// which would keep LLVM from moving or combining the adds.
// RUN: ADJIT_NUM_THREADS=1 adjit-opt %s --adj-autodiff | FileCheck %s --check-prefix=MLIR
// RUN: ADJIT_NUM_THREADS=1 adjit-opt %s --adj-autodiff --emit=llvm | FileCheck %s --implicit-check-not=acq_rel

func.func private @k(%x: memref<?xf32>, %idx: memref<?xindex>, %y: memref<?xf32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %j = memref.load %idx[%i] : memref<?xindex>
  %xj = memref.load %x[%j] : memref<?xf32>
  %r = arith.mulf %xj, %xj : f32
  memref.store %r, %y[%i] : memref<?xf32>
  return
}
func.func @run(%x: memref<?xf32>, %idx: memref<?xindex>, %y: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %y, %c0 : memref<?xf32>
  "adj.launch"(%n) ({
    func.call @k(%x, %idx, %y) : (memref<?xf32>, memref<?xindex>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}
"adj.autodiff"() {sym_name = "grad", fn = @run, mode = "reverse", activity = ["dup", "const", "dup"], ret_activity = "const", llvm.emit_c_interface} : () -> ()

// MLIR-LABEL: func.func private @__adj_k_rev_dcd_c_rev(
// MLIR: memref.atomic_rmw addf
// CHECK: atomicrmw fadd ptr %{{[0-9]+}}, float %{{[0-9]+}} monotonic
