// The written-argument analysis (passes/written.py): an array a call returns joins only the
// arguments the callee may return, so a fresh result makes no argument written; a returned
// argument, a view of one (subview), or one of two on a branch still counts.
// RUN: adjit-opt --adj-annotate-written %s | FileCheck %s

// CHECK-LABEL: func.func private @fresh
// CHECK-SAME: adj.written = array<i64: 1>
func.func private @fresh(%x: memref<?xf64>, %y: memref<?xf64>) -> memref<?xf64> {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f64
  memref.store %one, %y[%c0] : memref<?xf64>
  %n = memref.dim %x, %c0 : memref<?xf64>
  %r = memref.alloc(%n) : memref<?xf64>
  return %r : memref<?xf64>
}

// The issue's shape: the caller writes y through @fresh, x is only read.
// CHECK-LABEL: func.func @calls_fresh
// CHECK-SAME: adj.written = array<i64: 1>
func.func @calls_fresh(%x: memref<?xf64>, %y: memref<?xf64>) -> memref<?xf64> {
  %r = call @fresh(%x, %y) : (memref<?xf64>, memref<?xf64>) -> memref<?xf64>
  return %r : memref<?xf64>
}

// Writing the fresh result writes neither argument.
// CHECK-LABEL: func.func @writes_fresh_result
// CHECK-SAME: adj.written = array<i64: 1>
func.func @writes_fresh_result(%x: memref<?xf64>, %y: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %two = arith.constant 2.0 : f64
  %r = call @fresh(%x, %y) : (memref<?xf64>, memref<?xf64>) -> memref<?xf64>
  memref.store %two, %r[%c0] : memref<?xf64>
  return
}

// CHECK-LABEL: func.func private @view_of_first
// CHECK-SAME: adj.written = array<i64>
func.func private @view_of_first(%x: memref<?xf64>, %y: memref<?xf64>) -> memref<?xf64, strided<[1], offset: 1>> {
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  %m = arith.subi %n, %c1 : index
  %v = memref.subview %x[1] [%m] [1] : memref<?xf64> to memref<?xf64, strided<[1], offset: 1>>
  return %v : memref<?xf64, strided<[1], offset: 1>>
}

// A view of x is returned and written: x is written, y is not.
// CHECK-LABEL: func.func @writes_returned_view
// CHECK-SAME: adj.written = array<i64: 0>
func.func @writes_returned_view(%x: memref<?xf64>, %y: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %two = arith.constant 2.0 : f64
  %v = call @view_of_first(%x, %y) : (memref<?xf64>, memref<?xf64>) -> memref<?xf64, strided<[1], offset: 1>>
  memref.store %two, %v[%c0] : memref<?xf64, strided<[1], offset: 1>>
  return
}

// CHECK-LABEL: func.func private @one_of
// CHECK-SAME: adj.written = array<i64>
func.func private @one_of(%x: memref<?xf64>, %y: memref<?xf64>, %z: memref<?xf64>, %c: i1) -> memref<?xf64> {
  %r = scf.if %c -> memref<?xf64> {
    scf.yield %x : memref<?xf64>
  } else {
    scf.yield %z : memref<?xf64>
  }
  return %r : memref<?xf64>
}

// The result may be x or z: both count as written, y does not.
// CHECK-LABEL: func.func @writes_one_of
// CHECK-SAME: adj.written = array<i64: 0, 2>
func.func @writes_one_of(%x: memref<?xf64>, %y: memref<?xf64>, %z: memref<?xf64>, %c: i1) {
  %c0 = arith.constant 0 : index
  %two = arith.constant 2.0 : f64
  %r = call @one_of(%x, %y, %z, %c) : (memref<?xf64>, memref<?xf64>, memref<?xf64>, i1) -> memref<?xf64>
  memref.store %two, %r[%c0] : memref<?xf64>
  return
}

func.func private @external(%x: memref<?xf64>, %y: memref<?xf64>) -> memref<?xf64>

// A function without a body may write, and return, any array argument.
// CHECK-LABEL: func.func @calls_external
// CHECK-SAME: adj.written = array<i64: 0, 1>
func.func @calls_external(%x: memref<?xf64>, %y: memref<?xf64>) -> memref<?xf64> {
  %r = call @external(%x, %y) : (memref<?xf64>, memref<?xf64>) -> memref<?xf64>
  return %r : memref<?xf64>
}

// A scalar argument is never written. A recursive call is taken to return any of its array
// arguments (sound, not precise: y counts too).
// CHECK-LABEL: func.func @recursive
// CHECK-SAME: adj.written = array<i64: 0, 1>
func.func @recursive(%x: memref<?xf64>, %y: memref<?xf64>, %n: i64) -> memref<?xf64> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0 : i64
  %two = arith.constant 2.0 : f64
  %done = arith.cmpi sle, %n, %zero : i64
  %r = scf.if %done -> memref<?xf64> {
    scf.yield %x : memref<?xf64>
  } else {
    %one = arith.constant 1 : i64
    %m = arith.subi %n, %one : i64
    %s = func.call @recursive(%x, %y, %m) : (memref<?xf64>, memref<?xf64>, i64) -> memref<?xf64>
    scf.yield %s : memref<?xf64>
  }
  memref.store %two, %r[%c0] : memref<?xf64>
  return %r : memref<?xf64>
}
