"""`adj.print` to C's printf (the CPU) or CUDA's vprintf (a GPU), in the LLVM dialect.

The op's operands are 64-bit words and its `kinds` say what each is (dialects/adj.irdl.mlir):
an integer is passed as it is, a double's bits are bitcast back to f64, and a boolean becomes
the address of the string "True" or "False" for its %s. The format and those two strings are
private constant globals of the module that holds the function (the builtin.module on the
CPU, the kernel's gpu.module on a GPU), one per distinct text.

CPU: `printf(format, args...)`, then `fflush(NULL)`, so that what a call printed has left C's
buffer when the call returns: in a pipe or a file (pytest's capfd, a notebook's captured
output) C's stdout is fully buffered, and without the flush the text would appear at exit, out
of order with Python's own prints. A print is one printf, so the lines of concurrent work items
never mix within a line (stdio locks the stream per call); their order is the threads'.

GPU: `vprintf(format, buffer)`, CUDA's device printf (what MLIR's gpu.printf lowers to, which
takes no pointers, so it cannot print a boolean's string): the buffer holds the arguments as
8-byte slots, an alloca at the function's entry (one in a loop would grow the stack every
iteration). The device's output reaches the host's stdout when the host synchronises with
the device after the launch.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm


# the strings a word of kind b (a bool), w (a whole number's point in Python's repr) or p
# (in NumPy's repr of an array) selects: (when 0, when not)
_STRINGS = {"b": ("False", "True"), "w": ("", ".0"), "p": ("", ".")}


def lower_prints(holder: ir.Operation, prints: list[ir.Operation], gpu: bool = False) -> None:
    """Lowers `prints`, the adj.print ops inside `holder`, a builtin.module (gpu=False) or a
    gpu.module (gpu=True), whose body gets the globals and declarations the calls need. The
    caller finds them in a walk it makes anyway: a walk of its own would cost every compile
    ~5 us an op."""
    if not prints:
        return
    body = holder.regions[0].blocks[0]
    with holder.location:
        lowering = _Lowering(body, gpu)
        for op in prints:
            with op.location:
                lowering.lower(op)
            op.erase()


def _escaped(text: bytes) -> str:
    """`text` as the body of an MLIR string literal."""
    return "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}"
                   for b in text)


class _Lowering:
    def __init__(self, body: ir.Block, gpu: bool):
        self.body, self.gpu = body, gpu
        self.ptr = ir.Type.parse("!llvm.ptr")
        self.i32 = ir.IntegerType.get_signless(32)
        self.i64 = ir.IntegerType.get_signless(64)
        self.names = {str(ir.StringAttr(op.attributes["sym_name"]).value)
                      for op in body.operations if "sym_name" in op.attributes}
        self.strings: dict[bytes, str] = {}
        if gpu:
            self._declare("vprintf", "!llvm.ptr, !llvm.ptr")
        else:
            self._declare("printf", "!llvm.ptr, ...")
            self._declare("fflush", "!llvm.ptr")

    def _declare(self, name: str, params: str) -> None:
        if name not in self.names:
            self._insert(f"llvm.func @{name}({params}) -> i32")
            self.names.add(name)

    def _insert(self, text: str) -> None:
        ir.InsertionPoint.at_block_begin(self.body).insert(ir.Operation.parse(text))

    def string(self, text: str) -> ir.Value:
        """The address of a constant global holding `text`, NUL-terminated."""
        data = text.encode() + b"\0"
        name = self.strings.get(data)
        if name is None:
            n = len(self.strings)
            while f"adj_print_str{n}" in self.names:
                n += 1
            name = f"adj_print_str{n}"
            self.names.add(name)
            self.strings[data] = name
            self._insert(f'llvm.mlir.global private constant @{name}("{_escaped(data)}") '
                         f'{{addr_space = 0 : i32}} : !llvm.array<{len(data)} x i8>')
        return llvm.AddressOfOp(self.ptr, name).result

    def lower(self, op: ir.Operation) -> None:
        with ir.InsertionPoint(op):
            kinds = ir.StringAttr(op.attributes["kinds"]).value
            fmt = self.string(ir.StringAttr(op.attributes["format"]).value)
            words = list(op.operands)
            args = [self._argument(word, kind) for word, kind in zip(words, kinds)]
            if self.gpu:
                self._vprintf(op, fmt, args)
                return
            printf = ir.TypeAttr.get(ir.Type.parse("!llvm.func<i32 (ptr, ...)>"))
            llvm.CallOp(self.i32, [fmt, *args], [], [], var_callee_type=printf,
                        callee=ir.FlatSymbolRefAttr.get("printf"))
            llvm.CallOp(self.i32, [llvm.ZeroOp(self.ptr).result], [], [],
                        callee=ir.FlatSymbolRefAttr.get("fflush"))

    def _argument(self, word: ir.Value, kind: str) -> ir.Value:
        if kind == "f":
            return arith.bitcast(ir.F64Type.get(), word)
        if kind in _STRINGS:
            false, true = _STRINGS[kind]
            on = arith.cmpi(arith.CmpIPredicate.ne, word, arith.constant(self.i64, 0))
            return llvm.SelectOp(on, self.string(true), self.string(false)).result
        return word

    def _vprintf(self, op: ir.Operation, fmt: ir.Value, args: list[ir.Value]) -> None:
        if args:
            buffer = self._entry_alloca(op, len(args))
            for k, a in enumerate(args):
                slot = llvm.GEPOp(self.ptr, buffer, [], ir.DenseI32ArrayAttr.get([k]),
                                  ir.TypeAttr.get(self.i64), 0).result
                llvm.StoreOp(a, slot)      # 8-byte slots: vprintf's layout of i64/f64/ptr
        else:
            buffer = llvm.ZeroOp(self.ptr).result
        llvm.CallOp(self.i32, [fmt, buffer], [], [], callee=ir.FlatSymbolRefAttr.get("vprintf"))

    def _entry_alloca(self, op: ir.Operation, n: int) -> ir.Value:
        fn = op.parent
        while fn.operation.name not in ("func.func", "gpu.func"):
            fn = fn.parent
        entry = fn.regions[0].blocks[0]
        with ir.InsertionPoint.at_block_begin(entry):
            one = llvm.ConstantOp(self.i64, ir.IntegerAttr.get(self.i64, 1)).result
            return llvm.AllocaOp(self.ptr, one, ir.TypeAttr.get(
                ir.Type.parse(f"!llvm.array<{n} x i64>")), alignment=8).result
