// adj.print (passes/lower_print.py): on the CPU a printf of the format, each 64-bit word
// read as its kind says (an integer as it is, a double's bits bitcast back, a boolean the
// address of "True" or "False"), then fflush(NULL) so the text leaves C's buffer before the
// call returns; on a GPU a vprintf of the format and a buffer of 8-byte slots, allocated at
// the function's entry. The derivative of a printing function prints in its primal only:
// the reverse function has no print, the forward one prints once.
// RUN: adjit-opt %s --adj-lower-cpu | FileCheck %s --check-prefix=CPU
// RUN: adjit-opt %s --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s --check-prefix=AD

// CPU-DAG: llvm.func @printf(!llvm.ptr, ...) -> i32
// CPU-DAG: llvm.func @fflush(!llvm.ptr) -> i32
// CPU-DAG: llvm.mlir.global private constant @[[FMT:adj_print_str[0-9]+]]("x=%.3f n=%lld %s 100%%\0A\00")
// CPU-DAG: llvm.mlir.global private constant @[[T:adj_print_str[0-9]+]]("True\00")
// CPU-DAG: llvm.mlir.global private constant @[[F:adj_print_str[0-9]+]]("False\00")
// CPU-LABEL: func.func @show(
// CPU-SAME: %[[X:[a-z0-9]+]]: i64, %[[N:[a-z0-9]+]]: i64, %[[B:[a-z0-9]+]]: i64
// CPU: %[[FP:.*]] = llvm.mlir.addressof @[[FMT]] : !llvm.ptr
// CPU: %[[XF:.*]] = arith.bitcast %[[X]] : i64 to f64
// CPU: %[[ISTRUE:.*]] = arith.cmpi ne, %[[B]],
// CPU: %[[TP:.*]] = llvm.mlir.addressof @[[T]] : !llvm.ptr
// CPU: %[[FP2:.*]] = llvm.mlir.addressof @[[F]] : !llvm.ptr
// CPU: %[[S:.*]] = llvm.select %[[ISTRUE]], %[[TP]], %[[FP2]] : i1, !llvm.ptr
// CPU: llvm.call @printf(%[[FP]], %[[XF]], %[[N]], %[[S]]) vararg(!llvm.func<i32 (ptr, ...)>) : (!llvm.ptr, f64, i64, !llvm.ptr) -> i32
// CPU: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CPU-NEXT: llvm.call @fflush(%[[NULL]]) : (!llvm.ptr) -> i32
// CPU-NOT: adj.print
func.func @show(%x: i64, %n: i64, %b: i64) attributes {adj.entry} {
  "adj.print"(%x, %n, %b) {format = "x=%.3f n=%lld %s 100%%\n", kinds = "fib"} : (i64, i64, i64) -> ()
  return
}

// PTX: .extern .func  (.param .b32 func_retval0) vprintf
// PTX-LABEL: .visible .entry k(
// PTX: .local .align 8 .b8 __local_depot
// PTX: st.local.b64
// PTX: call.uni (retval0), vprintf,
func.func @k(%x: memref<?xf64>) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %v = memref.load %x[%i] : memref<?xf64>
  %w = arith.bitcast %v : f64 to i64
  %j = arith.index_cast %i : index to i64
  "adj.print"(%j, %w) {format = "item %lld: %g\n", kinds = "if"} : (i64, i64) -> ()
  return
}

// AD-LABEL: func.func @square
// AD: "adj.print"
// AD-LABEL: func.func @dsquare_aug
// AD: "adj.print"
// AD-LABEL: func.func @dsquare_rev
// AD-NOT: "adj.print"
// AD: return
// AD-LABEL: func.func @tsquare
// AD: "adj.print"
// AD-NOT: "adj.print"
// AD: return
func.func @square(%x: f64) -> f64 {
  %w = arith.bitcast %x : f64 to i64
  "adj.print"(%w) {format = "x = %g\n", kinds = "f"} : (i64) -> ()
  %y = arith.mulf %x, %x : f64
  return %y : f64
}
"adj.autodiff"() {sym_name = "dsquare", fn = @square, mode = "reverse", activity = ["active"], ret_activity = "active"} : () -> ()
"adj.autodiff"() {sym_name = "tsquare", fn = @square, mode = "forward", activity = ["dup"], ret_activity = "dup"} : () -> ()
