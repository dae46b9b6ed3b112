// A host program (device="cuda") with checks, lowered as compile_host does before the CPU
// pipeline (--adj-lower-cuda-host, then --adj-lower-cpu): the entry and the launcher take
// the call's error cell as a last memref<1xi64> parameter, like every function the module
// defines; the launch hook, which the runtime provides, keeps its signature. A check in host
// code stores its number into the cell of the call it runs in.
// RUN: adjit-opt %s --adj-lower-cuda-host --adj-lower-cpu | FileCheck %s --implicit-check-not=memref.global --implicit-check-not='"adj.'

func.func @k(%x: memref<?xf64>, %a: f64) attributes {adj.kernel, adj.ndim = 1 : i64} {
  return
}

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?xf64>, %[[N:[a-z0-9]+]]: i64, %[[D:[a-z0-9]+]]: i64, %[[CELL:[a-z0-9]+]]: memref<1xi64>)
func.func @main(%x: memref<?xf64>, %n: i64, %d: i64) attributes {adj.entry, llvm.emit_c_interface} {
  %zero = arith.constant 0 : i64
  %ok = arith.cmpi ne, %d, %zero : i64
  // CHECK: scf.if
  // CHECK: memref.store %{{.*}}, %[[CELL]][%{{.*}}] : memref<1xi64>
  "adj.check"(%ok) {error = "ZeroDivisionError", message = "integer division or modulo by zero"} : (i1) -> ()
  %q = arith.divsi %n, %d : i64
  %a = arith.sitofp %q : i64 to f64
  %c0 = arith.constant 0 : index
  %len = memref.dim %x, %c0 : memref<?xf64>
  // CHECK: call @[[LAUNCHER:__adjit_launch__k__b256]](%[[X]], %{{.*}}, %{{.*}}, %[[CELL]]) : (memref<?xf64>, f64, index, memref<1xi64>) -> ()
  "adj.launch"(%len) ({
    func.call @k(%x, %a) : (memref<?xf64>, f64) -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}

// CHECK: func.func private @[[LAUNCHER]](%{{.*}}: memref<?xf64>, %{{.*}}: f64, %{{.*}}: index, %{{.*}}: memref<1xi64>) attributes {no_inline}
// CHECK: call @__adjit_cuda_launch(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}) : (i64, i64, i64, i64, i64) -> ()
// CHECK: func.func private @__adjit_cuda_launch(i64, i64, i64, i64, i64)
