// Boolean arrays are bytes in memory: --emit=llvm after --adj-lower-cpu widens them too
// (this MLIR build aborts on a load of an i1 memref).
// RUN: adjit-opt %s --adj-lower-cpu --emit=llvm | FileCheck %s

// CHECK-LABEL: define void @negate(
// CHECK: load i8
// CHECK: store i8
// CHECK-LABEL: define void @_mlir_ciface_negate(
func.func @negate(%m: memref<?xi1>) attributes {adj.entry, llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %t = arith.constant true
  %v = memref.load %m[%c0] : memref<?xi1>
  %n = arith.xori %v, %t : i1
  memref.store %n, %m[%c0] : memref<?xi1>
  return
}
