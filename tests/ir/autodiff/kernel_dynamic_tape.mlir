// A kernel's values saved inside a loop whose trip count differs between work items (here
// m + the item's index) go to a packed per-item stack (dynamic_tape.py): the launch rule runs
// the counting kernel (@..._count: no stores to arrays, counts[item] = the values it would
// push), the exclusive scan offsets[i + 1] = offsets[i] + counts[i] in three launches (each
// chunk of 1024 counts summed, one item scanning the chunk sums and writing the total, each
// chunk writing its offsets), allocates the stack with offsets[items] elements and runs the
// augmented kernel, which
// pushes at its cursor from offsets[item] (dropping a push past offsets[item + 1]) and checks
// that it ends at offsets[item + 1]. The reverse kernel pops from offsets[item + 1] down.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func private @by_index(%x: memref<?xf64>, %y: memref<?xf64>, %m: index)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.addi %m, %i : index
  %xi = memref.load %x[%i] : memref<?xf64>
  %r = scf.for %j = %c0 to %n step %c1 iter_args(%a = %xi) -> f64 {
    %t = arith.mulf %a, %a : f64
    scf.yield %t : f64
  }
  memref.store %r, %y[%i] : memref<?xf64>
  return
}

func.func @run(%x: memref<?xf64>, %y: memref<?xf64>, %m: index) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  "adj.launch"(%n) ({
    func.call @by_index(%x, %y, %m) : (memref<?xf64>, memref<?xf64>, index) -> ()
    gpu.yield
  }) {kernel = @by_index} : (index) -> ()
  return
}
"adj.autodiff"() {sym_name = "d", fn = @run, mode = "reverse", activity = ["dup", "dup", "const"], ret_activity = "const"} : () -> ()

// The augmented kernel: its stack and offsets after the kernel's parameters.
// CHECK-LABEL: func.func private @{{.*}}by_index{{.*}}_aug(
// CHECK-SAME: %[[STACK:[a-z0-9]+]]: memref<?xf64>, %[[OFFSETS:[a-z0-9]+]]: memref<?xindex>)
// CHECK: %[[ITEM:.*]] = "adj.index"()
// CHECK: %[[START:.*]] = memref.load %[[OFFSETS]][%[[ITEM]]]
// CHECK: %[[NEXT_ITEM:.*]] = arith.addi %[[ITEM]], %{{.*}} : index
// CHECK: %[[END:.*]] = memref.load %[[OFFSETS]][%[[NEXT_ITEM]]]
// CHECK: %[[R:.*]]:3 = scf.for {{.*}} iter_args(%[[A:[a-z0-9]+]] = %{{.*}}, %[[BUF:[a-z0-9]+]] = %[[STACK]], %[[AT:[a-z0-9]+]] = %[[START]]) -> (f64, memref<?xf64>, index)
// CHECK:   %[[ROOM:.*]] = arith.cmpi ult, %[[AT]], %[[END]] : index
// CHECK:   scf.if %[[ROOM]] {
// CHECK:     memref.store %[[A]], %[[BUF]][%[[AT]]] : memref<?xf64>
// CHECK: %[[DONE:.*]] = arith.cmpi eq, %[[R]]#2, %[[END]] : index
// CHECK: "adj.check"(%[[DONE]]) {error = "RuntimeError"

// The reverse kernel pops from the end of its item's range.
// CHECK-LABEL: func.func private @{{.*}}by_index{{.*}}_rev(
// CHECK-SAME: %[[STACK:[a-z0-9]+]]: memref<?xf64>, %[[OFFSETS:[a-z0-9]+]]: memref<?xindex>)
// CHECK: %[[ITEM:.*]] = "adj.index"()
// CHECK: %[[NEXT_ITEM:.*]] = arith.addi %[[ITEM]], %{{.*}} : index
// CHECK: %[[END:.*]] = memref.load %[[OFFSETS]][%[[NEXT_ITEM]]]
// CHECK: memref.store %[[END]], %[[PTR:.*]][] : memref<index>
// CHECK: scf.for
// CHECK:   %[[TOP:.*]] = memref.load %[[PTR]][]
// CHECK:   %[[BELOW:.*]] = arith.subi %[[TOP]], %{{.*}} : index
// CHECK:   memref.store %[[BELOW]], %[[PTR]][]
// CHECK:   memref.load %[[STACK]][%[[BELOW]]] : memref<?xf64>

// The counting kernel: the loop runs, nothing is stored but the count.
// CHECK-LABEL: func.func private @{{.*}}by_index{{.*}}_count(
// CHECK-SAME: %[[COUNTS:[a-z0-9]+]]: memref<?xindex>)
// CHECK: %[[ITEM:.*]] = "adj.index"()
// CHECK: %[[N:.*]]:3 = scf.for {{.*}} iter_args({{.*}}, %[[AT:[a-z0-9]+]] = %{{.*}}) -> (f64, memref<?xindex>, index)
// CHECK:   %[[NEXT:.*]] = arith.addi %[[AT]], %{{.*}} : index
// CHECK:   scf.yield %{{.*}}, %{{.*}}, %[[NEXT]] : f64, memref<?xindex>, index
// CHECK-NOT: memref.store %{{.*}}, %arg
// CHECK: memref.store %[[N]]#2, %[[COUNTS]][%[[ITEM]]] : memref<?xindex>
// CHECK-NEXT: return

// The launch rule: count, offsets, stack of offsets[items] values, then the augmented kernel.
// CHECK-LABEL: func.func @d_aug(
// CHECK: %[[ITEMS:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK: %[[CNT:.*]] = memref.alloc(%[[ITEMS]]) : memref<?xindex>
// CHECK: "adj.launch"(%{{.*}}) ({
// CHECK-NEXT: func.call @{{.*}}_count(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[CNT]])
// CHECK: "adj.sync"()
// CHECK: %[[CHUNKS:.*]] = arith.ceildivui %[[ITEMS]], %{{.*}} : index
// CHECK: %[[SUMS:.*]] = memref.alloc(%{{.*}}) : memref<?xindex>
// CHECK: %[[OFF:.*]] = memref.alloc(%{{.*}}) : memref<?xindex>
// CHECK: "adj.launch"(%[[CHUNKS]]) ({
// CHECK-NEXT: func.call @__adj_tape_chunk_sums(%[[CNT]], %[[SUMS]])
// CHECK: "adj.launch"(%{{.*}}) ({
// CHECK-NEXT: func.call @__adj_tape_scan_chunks(%[[SUMS]], %[[OFF]])
// CHECK: "adj.launch"(%[[CHUNKS]]) ({
// CHECK-NEXT: func.call @__adj_tape_chunk_offsets(%[[CNT]], %[[SUMS]], %[[OFF]])
// CHECK: "adj.sync"()
// CHECK: %[[TOTAL:.*]] = memref.load %[[OFF]][%[[ITEMS]]] : memref<?xindex>
// CHECK: %[[PACKED:.*]] = memref.alloc(%[[TOTAL]]) : memref<?xf64>
// CHECK: "adj.launch"(%{{.*}}) ({
// CHECK-NEXT: func.call @{{.*}}_aug(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[PACKED]], %[[OFF]])

// Chunk c sums counts[1024 c, min(1024 (c + 1), n)).
// CHECK-LABEL: func.func private @__adj_tape_chunk_sums(
// CHECK-SAME: %[[C:[a-z0-9]+]]: memref<?xindex>, %[[S:[a-z0-9]+]]: memref<?xindex>)
// CHECK-SAME: attributes {adj.kernel, adj.ndim = 1 : i64}
// CHECK: %[[K:.*]] = "adj.index"()
// CHECK: %[[SUM:.*]] = scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (index)
// CHECK:   %[[CI:.*]] = memref.load %[[C]][%[[I]]]
// CHECK:   arith.addi %[[ACC]], %[[CI]] : index
// CHECK: memref.store %[[SUM]], %[[S]][%[[K]]]

// One item: the chunk sums become the chunks' starts; the total goes to offsets[n].
// CHECK-LABEL: func.func private @__adj_tape_scan_chunks(
// CHECK-SAME: %[[S:[a-z0-9]+]]: memref<?xindex>, %[[O:[a-z0-9]+]]: memref<?xindex>)
// CHECK: %[[TOTAL:.*]] = scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (index)
// CHECK:   %[[SK:.*]] = memref.load %[[S]][%[[K]]]
// CHECK:   memref.store %[[ACC]], %[[S]][%[[K]]]
// CHECK:   arith.addi %[[ACC]], %[[SK]] : index
// CHECK: memref.store %[[TOTAL]], %[[O]][%{{.*}}]

// Chunk c writes offsets[i] from its start.
// CHECK-LABEL: func.func private @__adj_tape_chunk_offsets(
// CHECK-SAME: %[[C:[a-z0-9]+]]: memref<?xindex>, %[[S:[a-z0-9]+]]: memref<?xindex>, %[[O:[a-z0-9]+]]: memref<?xindex>)
// CHECK: %[[K:.*]] = "adj.index"()
// CHECK: %[[START:.*]] = memref.load %[[S]][%[[K]]]
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[AT:.*]] = %[[START]]) -> (index)
// CHECK:   memref.store %[[AT]], %[[O]][%[[I]]]
