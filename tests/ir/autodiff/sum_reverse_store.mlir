// The reverse of a loop nest marked adj.covers_once (compiler/arrays.py `reduce`: it loads one
// array, each element once): in parallel, and where the array's shadow is untouched so far
// (memory.shadow_fresh_before: an allocation of the function, nothing after the loop touching
// it) each element's adjoint is stored, not added, and the shadow's zero-fill runs only when
// the loop covers fewer elements than the allocation (control_flow._reverse_covering).
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s
func.func @loss(%x: memref<?xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %y = memref.alloc(%n) : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<?xf32>
    %s = arith.mulf %v, %v : f32
    memref.store %s, %y[%i] : memref<?xf32>
  }
  %chunks = arith.ceildivui %n, %c4 : index
  %part = memref.alloc(%chunks) : memref<?xf32>
  scf.parallel (%c) = (%c0) to (%chunks) step (%c1) {
    %lo = arith.muli %c, %c4 : index
    %hi0 = arith.addi %lo, %c4 : index
    %hi = arith.minui %hi0, %n : index
    %zero = arith.constant 0.0 : f32
    %t = scf.for %j = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
      %e = memref.load %y[%j] : memref<?xf32>
      %a = arith.addf %acc, %e : f32
      scf.yield %a : f32
    }
    memref.store %t, %part[%c] : memref<?xf32>
    scf.reduce
  } {adj.covers_once}
  %zero = arith.constant 0.0 : f32
  %r = scf.for %k = %c0 to %chunks step %c1 iter_args(%acc = %zero) -> (f32) {
    %p = memref.load %part[%k] : memref<?xf32>
    %a = arith.addf %acc, %p : f32
    scf.yield %a : f32
  }
  return %r : f32
}
"adj.autodiff"() {sym_name = "grad", fn = @loss, mode = "reverse", activity = ["dup"], ret_activity = "active"} : () -> ()

// CHECK-LABEL: func.func @grad_rev(
// The zero-fill of y's shadow moved under the check that the loop covers fewer elements
// than the allocation, then the reversed loop, in parallel, storing into the shadow without
// reading it.
// CHECK: %[[DY:[a-z0-9_]+]] = memref.alloc(%dim) : memref<?xf32>
// CHECK-NOT: memref.store %{{.*}}, %[[DY]]
// CHECK: %[[SAME:[a-z0-9_]+]] = arith.cmpi eq,
// CHECK: %[[PART:[a-z0-9_]+]] = arith.xori %[[SAME]],
// CHECK: scf.if %[[PART]] {
// CHECK-NEXT: scf.for
// CHECK: memref.store %{{.*}}, %[[DY]]
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK: scf.parallel
// CHECK-NOT: memref.load %[[DY]]
// CHECK: memref.store %{{.*}}, %[[DY]]
// CHECK-NOT: memref.load %[[DY]]
// CHECK: scf.reduce
// Then the first loop's reverse reads it.
// CHECK: memref.load %[[DY]]
// CHECK: return

// The array is the caller's, with its shadow: the reverse adds (in parallel still) and
// zero-fills nothing.
func.func @loss_arg(%y: memref<?xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %n = memref.dim %y, %c0 : memref<?xf32>
  %chunks = arith.ceildivui %n, %c4 : index
  %part = memref.alloc(%chunks) : memref<?xf32>
  scf.parallel (%c) = (%c0) to (%chunks) step (%c1) {
    %lo = arith.muli %c, %c4 : index
    %hi0 = arith.addi %lo, %c4 : index
    %hi = arith.minui %hi0, %n : index
    %zero = arith.constant 0.0 : f32
    %t = scf.for %j = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
      %e = memref.load %y[%j] : memref<?xf32>
      %a = arith.addf %acc, %e : f32
      scf.yield %a : f32
    }
    memref.store %t, %part[%c] : memref<?xf32>
    scf.reduce
  } {adj.covers_once}
  %zero = arith.constant 0.0 : f32
  %r = scf.for %k = %c0 to %chunks step %c1 iter_args(%acc = %zero) -> (f32) {
    %p = memref.load %part[%k] : memref<?xf32>
    %a = arith.addf %acc, %p : f32
    scf.yield %a : f32
  }
  return %r : f32
}
"adj.autodiff"() {sym_name = "grad_arg", fn = @loss_arg, mode = "reverse", activity = ["dup"], ret_activity = "active"} : () -> ()

// CHECK-LABEL: func.func @grad_arg_rev(
// CHECK-SAME: %{{[a-z0-9_]+}}: memref<?xf32>, %[[DY2:[a-z0-9_]+]]: memref<?xf32>
// CHECK-NOT: scf.if
// CHECK: scf.parallel
// CHECK: %[[OLD:[a-z0-9_]+]] = memref.load %[[DY2]]
// CHECK: arith.addf %[[OLD]],
// CHECK: scf.reduce
// CHECK: return

// Without the mark, the same loop's reverse is the serial loop it always was.
func.func @loss_unmarked(%y: memref<?xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %n = memref.dim %y, %c0 : memref<?xf32>
  %chunks = arith.ceildivui %n, %c4 : index
  %part = memref.alloc(%chunks) : memref<?xf32>
  scf.parallel (%c) = (%c0) to (%chunks) step (%c1) {
    %lo = arith.muli %c, %c4 : index
    %hi0 = arith.addi %lo, %c4 : index
    %hi = arith.minui %hi0, %n : index
    %zero = arith.constant 0.0 : f32
    %t = scf.for %j = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
      %e = memref.load %y[%j] : memref<?xf32>
      %a = arith.addf %acc, %e : f32
      scf.yield %a : f32
    }
    memref.store %t, %part[%c] : memref<?xf32>
    scf.reduce
  }
  %zero = arith.constant 0.0 : f32
  %r = scf.for %k = %c0 to %chunks step %c1 iter_args(%acc = %zero) -> (f32) {
    %p = memref.load %part[%k] : memref<?xf32>
    %a = arith.addf %acc, %p : f32
    scf.yield %a : f32
  }
  return %r : f32
}
"adj.autodiff"() {sym_name = "grad_unmarked", fn = @loss_unmarked, mode = "reverse", activity = ["dup"], ret_activity = "active"} : () -> ()

// CHECK-LABEL: func.func @grad_unmarked_rev(
// CHECK-NOT: scf.parallel
// CHECK: return
