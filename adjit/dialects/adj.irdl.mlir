// The `adj` dialect, declared in IRDL so that stock MLIR parses, prints and verifies it
// (`mlir-opt --irdl-file=dialects/adj.irdl.mlir`). Kernels and device functions are not ops
// of this dialect: they are `func.func` marked with `adj.kernel` / `adj.func` attributes, so
// they stay isolated, callable symbols that every upstream pass understands.
//
// IRDL cannot express: terminators (regions end in `gpu.yield`), traits, or a constraint
// over a heterogeneous variadic. What it cannot check, the pass that reads the op checks
// (see dialects/adj.py: verify_launch and friends) and reports as a diagnostic.
irdl.dialect @adj {
  // Linear global index of the current work item (row-major over ndrange).
  irdl.operation @index {
    %idx = irdl.is index
    irdl.results(id: %idx)
  }
  // Index of the current work item along dimension `dim` (attribute, i64).
  irdl.operation @global_id {
    %idx = irdl.is index
    irdl.results(id: %idx)
    %dim = irdl.base "#builtin.integer"
    irdl.attributes {"dim" = %dim}
  }
  // Extent of the launch's ndrange along dimension `dim` (attribute, i64).
  irdl.operation @global_size {
    %idx = irdl.is index
    irdl.results(size: %idx)
    %dim = irdl.base "#builtin.integer"
    irdl.attributes {"dim" = %dim}
  }
  // A kernel launch over ndrange (one index operand per dimension). Attributes:
  // `kernel` (symbol of a func.func marked adj.kernel), optional `workgroupsize`
  // (array<i64>). The body holds exactly one func.call of `kernel` with the
  // launch's arguments, then gpu.yield: the call gives the heterogeneous argument
  // list a verified signature, which an IRDL variadic cannot.
  // Results (item sums): with N results, the call's last N arguments are per-item
  // buffers (memref<?xT>, T f32 or f64, one element per work item, each item storing its
  // own at [adj.index]); result k is the sum over items of buffer k, in f64 (as adjit.sum
  // accumulates f32). The launch has completed when they are available. A lowering may
  // compute the sums without the buffers (the CPU's, per chunk of items).
  irdl.operation @launch {
    %idx = irdl.is index
    irdl.operands(ndrange: variadic %idx)
    %f64 = irdl.is f64
    irdl.results(sums: variadic %f64)
    %kernel = irdl.base "#builtin.symbol_ref"
    irdl.attributes {"kernel" = %kernel}
    %body = irdl.region
    irdl.regions(body: %body)
  }
  // Wait for every launch issued so far (a no-op on the CPU, where launches block).
  irdl.operation @sync {
  }
  // Runtime check: when `ok` is false, the call that runs it raises the Python error
  // named by attribute `error` with `message` (and the op's location).
  irdl.operation @check {
    %i1 = irdl.is i1
    irdl.operands(ok: %i1)
    %error = irdl.base "#builtin.string"
    %message = irdl.base "#builtin.string"
    irdl.attributes {"error" = %error, "message" = %message}
  }
  // Prints to the standard output (C's printf on the CPU, flushed after each; vprintf on a
  // GPU). `format` is a printf format whose conversions read the operands in order; each
  // operand is a 64-bit word, since an IRDL variadic holds one type per op, and `kinds`
  // says what each word is, one letter per operand: "i" an integer (%lld, %llu, %llx...),
  // "f" a double's bits (%f, %e, %g...), "b" a boolean (0 or 1) read by a %s as False or True,
  // "w"/"p" a flag read by a %s as "" or ".0"/"." (the point %g leaves off a whole number).
  // An effect with no derivative (passes/op_facts.py): derivatives print in their primal.
  irdl.operation @print {
    %word = irdl.is i64
    irdl.operands(args: variadic %word)
    %format = irdl.base "#builtin.string"
    %kinds = irdl.base "#builtin.string"
    irdl.attributes {"format" = %format, "kinds" = %kinds}
  }
  // Differentiation request, a declaration: the autodiff pass replaces it with generated
  // functions named after `sym_name`. Attributes: `fn` (symbol of the differentiated
  // function), `mode` ("forward" | "reverse"), `activity` (array of strings, one per
  // argument: "const" | "active" | "dup" | "dupnoneed"), `ret_activity`, and optionally
  // `with_primal` (bool).
  irdl.operation @autodiff {
    %name = irdl.base "#builtin.string"
    %fn = irdl.base "#builtin.symbol_ref"
    %mode = irdl.base "#builtin.string"
    %activity = irdl.base "#builtin.array"
    %ret = irdl.base "#builtin.string"
    irdl.attributes {"sym_name" = %name, "fn" = %fn, "mode" = %mode,
                     "activity" = %activity, "ret_activity" = %ret}
  }
}
