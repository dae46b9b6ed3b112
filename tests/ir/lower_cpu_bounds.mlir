// --adj-lower-cpu and --adj-lower-cuda-host: a kernel whose work items all index an array
// with their ids (adj.ndrange_bounds, from --adj-ndrange-bounds) is launched only when the
// ndrange fits that array: an IndexError check per fact, and the launch under an scf.if.
// RUN: adjit-opt %s --adj-lower-cpu | FileCheck %s --check-prefixes=CHECK,CPU
// RUN: adjit-opt %s --adj-lower-cuda-host | FileCheck %s --check-prefixes=CHECK,HOST

func.func @k(%y: memref<?x?xf32>) attributes {adj.kernel, adj.ndim = 2 : i64, adj.ndrange_bounds = [{arg = 0 : i64, dim = 1 : i64, id = 1 : i64, message = "kernel k: ndrange[1] is larger than dimension 1 of argument 'y' (line 7)"}]} {
  return
}

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[Y:.*]]: memref<?x?xf32>, %[[N:.*]]: index, %[[M:[a-z0-9]+]]: index
// CPU-SAME: , %[[CELL:.*]]: memref<1xi64>)
// HOST-SAME: )
func.func @main(%y: memref<?x?xf32>, %n: index, %m: index) {
  // CHECK: %[[SIZE:.*]] = memref.dim %[[Y]], %{{.*}} : memref<?x?xf32>
  // CHECK: %[[FITS:.*]] = arith.cmpi ule, %[[M]], %[[SIZE]] : index
  // CPU: arith.xori %[[FITS]]
  // CPU: memref.store %{{.*}}, %[[CELL]][%{{.*}}] : memref<1xi64>
  // HOST: "adj.check"(%[[FITS]]) {error = "IndexError", message = "kernel k: ndrange[1] is larger than dimension 1 of argument 'y' (line 7)"}
  // CHECK: scf.if %[[FITS]] {
  // CPU: scf.parallel
  // HOST-NEXT: func.call @__adjit_launch__k__b256(%[[Y]], %[[N]], %[[M]])
  "adj.launch"(%n, %m) ({
    func.call @k(%y) : (memref<?x?xf32>) -> ()
    gpu.yield
  }) {kernel = @k} : (index, index) -> ()
  return
}
