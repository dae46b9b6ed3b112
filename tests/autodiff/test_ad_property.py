"""Property test: random straight-line and looping programs built from the supported ops,
reverse and forward mode against central differences."""
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from ad_helpers import ENTRY, GradCheck

UNARY = ["math.sin", "math.cos", "math.tanh", "math.atan", "arith.negf"]
BINARY = ["arith.addf", "arith.subf", "arith.mulf", "div"]


class Program:
    """Renders a random program: SSA values in scope form a pool that statements draw from."""

    def __init__(self, draw):
        self.draw = draw
        self.lines: list[str] = []
        self.count = 0

    def new(self) -> str:
        self.count += 1
        return f"%v{self.count}"

    def emit(self, line: str, indent: int) -> None:
        self.lines.append("  " * indent + line)

    def pick(self, pool: list[str]) -> str:
        return self.draw(st.sampled_from(pool))

    def statement(self, pool: list[str], depth: int, indent: int) -> None:
        kinds = ["unary", "binary", "binary", "load", "store"]
        if depth < 2:
            kinds += ["for", "if", "while"]
        kind = self.draw(st.sampled_from(kinds))
        r = self.new()
        if kind == "unary":
            self.emit(f"{r} = {self.draw(st.sampled_from(UNARY))} {self.pick(pool)} : f64", indent)
        elif kind == "binary":
            op, a, b = self.draw(st.sampled_from(BINARY)), self.pick(pool), self.pick(pool)
            if op == "div":   # a / (1 + b*b): defined everywhere
                sq, den = self.new(), self.new()
                self.emit(f"{sq} = arith.mulf {b}, {b} : f64", indent)
                self.emit(f"{den} = arith.addf {sq}, %one : f64", indent)
                self.emit(f"{r} = arith.divf {a}, {den} : f64", indent)
            else:
                self.emit(f"{r} = {op} {a}, {b} : f64", indent)
        elif kind == "load":
            k = self.draw(st.integers(0, 2))
            self.emit(f"{r} = memref.load %x[%c{k}] : memref<?xf64>", indent)
        elif kind == "store":
            k = self.draw(st.integers(0, 2))
            self.emit(f"memref.store {self.pick(pool)}, %x[%c{k}] : memref<?xf64>", indent)
            return
        elif kind == "for":
            trips = self.draw(st.integers(0, 3))
            i, carried = self.new(), self.new()
            self.emit(f"{r} = scf.for {i} = %c0 to %c{trips} step %c1 "
                      f"iter_args({carried} = {self.pick(pool)}) -> f64 {{", indent)
            inner = pool + [carried]
            self.block(inner, depth + 1, indent + 1)
            squashed = self.new()
            self.emit(f"{squashed} = math.tanh {inner[-1]} : f64", indent + 1)
            self.emit(f"scf.yield {squashed} : f64", indent + 1)
            self.emit("}", indent)
        elif kind == "while":
            # Runs `trips` times, counted by an index carried beside the value.
            trips = self.draw(st.integers(0, 3))
            w, k, c, w2, k2, k3 = (self.new() for _ in range(6))
            self.emit(f"{r}:2 = scf.while ({w} = {self.pick(pool)}, {k} = %c0) : (f64, index)"
                      f" -> (f64, index) {{", indent)
            self.emit(f"{c} = arith.cmpi ult, {k}, %c{trips} : index", indent + 1)
            self.emit(f"scf.condition({c}) {w}, {k} : f64, index", indent + 1)
            self.emit("} do {", indent)
            self.emit(f"^bb0({w2}: f64, {k2}: index):", indent)
            inner = pool + [w2]
            self.block(inner, depth + 1, indent + 1)
            squashed = self.new()
            self.emit(f"{squashed} = math.tanh {inner[-1]} : f64", indent + 1)
            self.emit(f"{k3} = arith.addi {k2}, %c1 : index", indent + 1)
            self.emit(f"scf.yield {squashed}, {k3} : f64, index", indent + 1)
            self.emit("}", indent)
            pool.append(f"{r}#0")
            return
        else:
            c = self.new()
            self.emit(f"{c} = arith.cmpf olt, {self.pick(pool)}, {self.pick(pool)} : f64", indent)
            self.emit(f"{r} = scf.if {c} -> f64 {{", indent)
            for branch in range(2):
                inner = list(pool)
                self.block(inner, depth + 1, indent + 1)
                self.emit(f"scf.yield {inner[-1]} : f64", indent + 1)
                self.emit("} else {" if branch == 0 else "}", indent)
        pool.append(r)

    def block(self, pool: list[str], depth: int, indent: int) -> None:
        for _ in range(self.draw(st.integers(1, 4))):
            self.statement(pool, depth, indent)

    def render(self) -> str:
        pool = ["%a", "%b"]
        self.block(pool, 0, 1)
        body = "\n".join(self.lines)
        result = pool[-1]
        return f"""
func.func @f(%a: f64, %b: f64, %x: memref<?xf64>) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %one = arith.constant 1.0 : f64
{body}
  return {result} : f64
}}
"""


@st.composite
def programs(draw):
    return Program(draw).render()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2**32 - 1))
def test_random_programs_match_finite_differences(text, seed):
    rng = np.random.default_rng(seed)
    args = [float(rng.uniform(-1.5, 1.5)), float(rng.uniform(-1.5, 1.5)),
            rng.uniform(-1.5, 1.5, 3)]
    g = GradCheck(text, "f", ["active", "active", "dup"])
    g.check(args, rtol=1e-5, atol=1e-7, seed=seed)
