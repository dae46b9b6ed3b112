"""Operators, the part of the code generator (`codegen.CodeGenerator`) that compiles Python's
arithmetic, unary, comparison and boolean operators and conditional expressions, on scalars
(scalar_ops.py), arrays (element-wise: arrays.elementwise), vectors (vectors.py) and matmul.
`and`, `or` and `x if c else y` keep Python's short-circuit meaning (control flow's `_choose`).
"""
from __future__ import annotations

import ast
import functools

from . import arrays as A
from . import scalar_ops as S
from . import vectors as V
from ..core.errors import UserError
from ..core.types import bool_
from .matmul import matmul
from .values import Array, ArrayExpr, Literal, PyObj, Scalar, Vec


class Operators:
    """A mixin of `CodeGenerator`: it uses the generator's `visit`, `error`, `require_host`
    and control flow's `_choose`."""

    @staticmethod
    def _binop_symbol(op: ast.operator) -> str:
        symbols = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/",
                   ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**", ast.BitAnd: "&",
                   ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
        if type(op) not in symbols:
            raise UserError(f"unsupported operator {type(op).__name__}")
        return symbols[type(op)]

    def _binary(self, op: str, a, b):
        if isinstance(a, Vec) or isinstance(b, Vec):
            return V.binary(op, a, b)
        for v in (a, b):
            if not isinstance(v, (Scalar, Literal, Array, ArrayExpr)):
                raise UserError(f"operator {op} on {S.describe(v)}")
        if isinstance(a, (Array, ArrayExpr)) or isinstance(b, (Array, ArrayExpr)):
            if op in ("+", "-", "*") and all(_is_bool(v) for v in (a, b)):
                # NumPy's bool arrays: + is `or`, * is `and` (Python's bools would count)
                if op == "-":
                    raise UserError("`-` of two booleans where one is an array is not "
                                    "supported (NumPy raises TypeError): use `^` or "
                                    "np.logical_xor")
                op = "|" if op == "+" else "&"
            out = A.elementwise(lambda x, y: S.binary(op, x, y), [a, b])
            if isinstance(out, ArrayExpr):   # (0-d arrays alone give a scalar: no memory)
                self.require_host(f"array arithmetic ({op})")
            return out
        return S.binary(op, a, b)

    def visit_BinOp(self, node: ast.BinOp):
        if isinstance(node.op, ast.MatMult):
            left, right = self.visit(node.left), self.visit(node.right)
            if isinstance(left, Vec) or isinstance(right, Vec):
                return V.binary("@", left, right)
            if not all(isinstance(v, (Array, ArrayExpr)) for v in (left, right)):
                raise self.error(node, "unsupported operator MatMult (@) on "
                                       f"{S.describe(left)} and {S.describe(right)}: @ "
                                       "multiplies 1-D and 2-D arrays")
            self.require_host("@ (matmul: a new array)")
            return matmul(self, left, right)
        return self._binary(self._binop_symbol(node.op), self.visit(node.left),
                            self.visit(node.right))

    def visit_UnaryOp(self, node: ast.UnaryOp):
        v = self.visit(node.operand)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(v, Vec):
            if not isinstance(node.op, ast.USub):
                raise self.error(node, f"unsupported operator {type(node.op).__name__} on "
                                       f"{S.describe(v)}")
            return V.negate(v)
        fn = {ast.USub: S.negate, ast.Not: S.logical_not, ast.Invert: S.invert}[type(node.op)]
        if isinstance(v, (Array, ArrayExpr)):
            if isinstance(node.op, ast.Not):
                if isinstance(v, Array) and v.type.ndim == 0:
                    return fn(v)   # a 0-d array's truth is its element's, as in NumPy
                raise self.error(node, "'not' of an array is ambiguous")
            return A.elementwise(fn, [v])
        if isinstance(v, PyObj) and isinstance(node.op, ast.Not):
            return Literal(not v.obj)
        return fn(v)

    def visit_Compare(self, node: ast.Compare):
        ops = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
               ast.NotEq: "!="}
        left = self.visit(node.left)
        result = None
        for op, right_node in zip(node.ops, node.comparators):
            right = self.visit(right_node)
            if isinstance(op, (ast.Is, ast.IsNot)):
                # `x.dval is None` in rules: decided at compile time, so it compares only
                # Python objects (None, modules, ...), never runtime values.
                if not (isinstance(left, PyObj) or isinstance(right, PyObj)):
                    raise self.error(node, "'is' compares compile-time Python objects such "
                                           "as None; compare values with ==")
                same = (isinstance(left, PyObj) and isinstance(right, PyObj) and
                        left.obj is right.obj)
                r = Literal(same if isinstance(op, ast.Is) else not same)
            elif type(op) not in ops:
                raise self.error(node, f"unsupported comparison {type(op).__name__}")
            elif isinstance(left, Vec) or isinstance(right, Vec):
                r = V.equal(ops[type(op)], left, right)
            elif isinstance(left, (Array, ArrayExpr)) or isinstance(right, (Array, ArrayExpr)):
                sym = ops[type(op)]
                r = A.elementwise(lambda x, y: S.compare(sym, x, y), [left, right])
            else:
                r = S.compare(ops[type(op)], left, right)
            result = r if result is None else S.binary("&", S.truth(result), S.truth(r))
            left = right
        return result

    def visit_BoolOp(self, node: ast.BoolOp):
        """`and`/`or` with Python's meaning: the result is the operand that decided it (of
        the operands' common type), and the right side runs only when needed (it may index
        or divide)."""
        is_and = isinstance(node.op, ast.And)
        acc = self.visit(node.values[0])
        for rhs in node.values[1:]:
            if isinstance(acc, Literal):
                if bool(acc.value) != is_and:
                    return acc   # decided: False and ... / True or ...
                acc = self.visit(rhs)
                continue
            left, rest = acc, functools.partial(self.visit, rhs)
            acc = self._choose(S.truth(left).value, rest if is_and else lambda: left,
                               (lambda: left) if is_and else rest, node)
        return acc

    def visit_IfExp(self, node: ast.IfExp):
        cond = self.visit(node.test)
        if isinstance(cond, Literal):
            return self.visit(node.body if cond.value else node.orelse)
        return self._choose(S.truth(cond).value, lambda: self.visit(node.body),
                            lambda: self.visit(node.orelse), node)


def _is_bool(v) -> bool:
    if isinstance(v, Literal):
        return isinstance(v.value, bool)
    return (v.type.dtype if isinstance(v, (Array, ArrayExpr)) else v.type) == bool_
