// --emit=llvm lowers adj IR as the runtime does and prints LLVM IR, from adj-level IR or
// from IR that --adj-lower-cpu already lowered.
// With more than one thread, the launch's loop goes to adjit's thread pool (parallel_for.py).
// RUN: ADJIT_NUM_THREADS=1 adjit-opt %s --emit=llvm | FileCheck %s --implicit-check-not=adj_parallel_for
// RUN: ADJIT_NUM_THREADS=1 adjit-opt %s --adj-lower-cpu --emit=llvm | FileCheck %s --implicit-check-not=adj_parallel_for
// RUN: ADJIT_NUM_THREADS=2 adjit-opt %s --emit=llvm | FileCheck %s --check-prefixes=CHECK,POOL

// The module has a check: no error global, but one more parameter, the call's error cell (a
// memref<1xi64>: its 5 words in @saxpy, a descriptor pointer in the C interface).
// CHECK-NOT: @__adj_error
// CHECK-DAG: define void @saxpy(ptr %{{[0-9]+}}, ptr %{{[0-9]+}}, i64 %{{[0-9]+}}, i64 %{{[0-9]+}}, i64 %{{[0-9]+}}, float %{{[0-9]+}}, ptr %{{[0-9]+}}, ptr %{{[0-9]+}}, i64 %{{[0-9]+}}, i64 %{{[0-9]+}}, i64 %{{[0-9]+}}, i64 %{{[0-9]+}}, ptr %{{[0-9]+}}, ptr %{{[0-9]+}}, i64 %{{[0-9]+}}, i64 %{{[0-9]+}}, i64 %{{[0-9]+}})
// CHECK-DAG: define void @_mlir_ciface_saxpy(ptr %{{[0-9]+}}, float %{{[0-9]+}}, ptr %{{[0-9]+}}, i64 %{{[0-9]+}}, ptr %{{[0-9]+}})
// CHECK-DAG: fmul float
// POOL-DAG: call void @adj_parallel_for(ptr @__adj_thunk___adj_par_saxpy_0, ptr %{{.*}}, i64 %{{.*}}, i64 2, i64 %{{.*}})

func.func @k(%x: memref<?xf32>, %a: f32, %y: memref<?xf32>) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %ok = arith.cmpi ult, %i, %n : index
  "adj.check"(%ok) {error = "IndexError", message = "index out of range"} : (i1) -> ()
  %xi = memref.load %x[%i] : memref<?xf32>
  %yi = memref.load %y[%i] : memref<?xf32>
  %ax = arith.mulf %a, %xi : f32
  %r = arith.addf %ax, %yi : f32
  memref.store %r, %y[%i] : memref<?xf32>
  return
}

func.func @saxpy(%x: memref<?xf32>, %a: f32, %y: memref<?xf32>, %n: index) attributes {adj.entry, llvm.emit_c_interface} {
  "adj.launch"(%n) ({
    func.call @k(%x, %a, %y) : (memref<?xf32>, f32, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  "adj.sync"() : () -> ()
  return
}
