// --adj-parallel-for (passes/parallel_for.py): an outermost scf.parallel without results
// moves into a function over [lo, hi) of its first dimension, called through a launcher
// that the LLVM lowering defines to call adj_parallel_for (runtime/native/parallel.cpp).
// RUN: adjit-opt %s --adj-parallel-for | FileCheck %s
// RUN: env ADJIT_NUM_THREADS=4 adjit-opt %s --emit=llvm | FileCheck %s --check-prefix=LLVM
// RUN: adjit-opt %s --adj-serialise-small-loops --adj-parallel-for | FileCheck %s --check-prefix=TWIN

// A 2-D loop: the body function runs rows [lb0 + lo*s0, lb0 + hi*s0) and every column;
// the memref, the scalar and the second dimension's bound are passed, the constants are
// made again inside (so that they still fold).
// CHECK-LABEL: func.func @scale(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?x?xf32>, %[[A:[a-z0-9]+]]: f32, %[[N:[a-z0-9]+]]: index, %[[M:[a-z0-9]+]]: index) attributes {adj.entry}
// CHECK: %[[SPAN:.*]] = arith.subi %[[N]], %{{.*}} : index
// CHECK: %[[COUNT:.*]] = arith.ceildivsi %[[SPAN]], %{{.*}} : index
// CHECK: %[[ITEMS:.*]] = arith.maxsi %[[COUNT]], %{{.*}} : index
// CHECK: %[[PARALLEL:.*]] = arith.constant 0 : i64
// CHECK: call @__adj_launch___adj_par_scale_0(%[[ITEMS]], %[[PARALLEL]], %[[X]], %[[A]], %[[M]]) : (index, i64, memref<?x?xf32>, f32, index) -> ()
// CHECK-NOT: scf.parallel
// CHECK: return

// After the LLVM lowering with 4 threads: the launcher passes the flattened arguments
// through a stack array to adj_parallel_for (with the loop's size class), whose thunk
// loads them and calls the body.
// LLVM-LABEL: define void @scale(
// LLVM: call void @__adj_launch___adj_par_scale_0(
// LLVM: define internal void @__adj_par_scale_0(i64 %{{.*}}, i64 %{{.*}}, ptr
// LLVM: define internal void @__adj_launch___adj_par_scale_0(i64 %0, i64 %1,
// LLVM: call void @adj_parallel_for(ptr @__adj_thunk___adj_par_scale_0, ptr %{{.*}}, i64 %0, i64 4, i64 %1)
// LLVM: define internal void @__adj_thunk___adj_par_scale_0(ptr %0, i64 %1, i64 %2)
// LLVM: load ptr, ptr
// LLVM: call void @__adj_par_scale_0(i64 %1, i64 %2,
func.func @scale(%x: memref<?x?xf32>, %a: f32, %n: index, %m: index) attributes {adj.entry} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %m) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<?x?xf32>
    %p = arith.mulf %v, %a : f32
    memref.store %p, %x[%i, %j] : memref<?x?xf32>
    scf.reduce
  }
  return
}

// A loop with a reduction is left alone (to scf-parallel-for-to-nested-fors: serial).
// CHECK-LABEL: func.func @total(
// CHECK: scf.parallel {{.*}} init
// CHECK: scf.reduce(
func.func @total(%x: memref<?xf32>, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %s = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%zero) -> f32 {
    %v = memref.load %x[%i] : memref<?xf32>
    scf.reduce(%v : f32) {
    ^bb0(%l: f32, %r: f32):
      %t = arith.addf %l, %r : f32
      scf.reduce.return %t : f32
    }
  }
  return %s : f32
}

// Of nested loops only the outermost moves (the inner one with it).
// CHECK-LABEL: func.func @nested(
// CHECK: call @__adj_launch___adj_par_nested_0(
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @nested(%x: memref<?x?xf32>, %n: index, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.parallel (%j) = (%c0) to (%m) step (%c1) {
      memref.store %one, %x[%i, %j] : memref<?x?xf32>
      scf.reduce
    }
    scf.reduce
  }
  return
}

// A loop that uses a value no launcher can pass (a vector) stays as it is.
// CHECK-LABEL: func.func @vectors(
// CHECK: scf.parallel
func.func @vectors(%x: memref<?xvector<4xf32>>, %v: vector<4xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %v, %x[%i] : memref<?xvector<4xf32>>
    scf.reduce
  }
  return
}

// The body functions and the launchers' declarations follow the functions.
// CHECK-LABEL: func.func @__adj_par_scale_0(
// CHECK-SAME: %[[LO:.*]]: index, %[[HI:.*]]: index, %[[BX:.*]]: memref<?x?xf32>, %[[BA:.*]]: f32, %[[BM:.*]]: index) {
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[FIRST:.*]] = arith.muli %[[LO]], %[[C1]] : index
// CHECK: %[[START:.*]] = arith.addi %[[C0]], %[[FIRST]] : index
// CHECK: %[[LAST:.*]] = arith.muli %[[HI]], %[[C1]] : index
// CHECK: %[[END:.*]] = arith.addi %[[C0]], %[[LAST]] : index
// CHECK: scf.for %[[I:.*]] = %[[START]] to %[[END]] step %[[C1]] {
// CHECK:   scf.for %[[J:.*]] = %[[C0]] to %[[BM]] step %[[C1]] {
// CHECK:     %[[V:.*]] = memref.load %[[BX]][%[[I]], %[[J]]]
// CHECK:     %[[P:.*]] = arith.mulf %[[V]], %[[BA]]
// CHECK:     memref.store %[[P]], %[[BX]][%[[I]], %[[J]]]
// CHECK: return
// CHECK: func.func private @__adj_launch___adj_par_scale_0(index, i64, memref<?x?xf32>, f32, index)
// CHECK-LABEL: func.func @__adj_par_nested_0(
// CHECK: scf.for
// CHECK:   scf.parallel
// CHECK: func.func private @__adj_launch___adj_par_nested_0(index, i64, memref<?x?xf32>, index)

// A loop small_loops.py gave a serial twin (its cost on the scf.if): one call replaces
// both, its size class TINY (2) up to 2^18 / cost iterations, else SMALL (1) where the twin
// would have run, else PARALLEL (0). The body exists once, in @__adj_par_scale_0.
// TWIN-LABEL: func.func @scale(
// TWIN: %[[SMALL:.*]] = arith.cmpi ule, %{{.*}}, %c131072 : index
// TWIN-NOT: scf.if
// TWIN: %[[TINY:.*]] = arith.cmpi ule, %{{.*}}, %c{{[0-9_]+}} : index
// TWIN: %[[S1:.*]] = arith.select %[[SMALL]], %{{.*}}, %{{.*}} : i64
// TWIN: %[[SIZE:.*]] = arith.select %[[TINY]], %{{.*}}, %[[S1]] : i64
// TWIN: call @__adj_launch___adj_par_scale_0(%{{.*}}, %[[SIZE]],
// TWIN-NOT: scf.for
// TWIN: return
