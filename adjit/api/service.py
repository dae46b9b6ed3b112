"""The specialisation and compile service: every product compiled from a declaration (a
`Function` or `Kernel`, functions.py) is named by one typed key (`Key`) and found along one
path (`_product`): this process's memo on the declaration, else the disk cache, else the
compiler, whose product the disk cache then stores for the next process.

The products: a CPU specialisation (`cpu`: compiled.Compiled), a CPU derivative
(`derivative`: derivative.Derivative, or compiled.LoadedDerivative read back), the entry of a
transform called from Python (`transform`: adjit.grad(adjit.grad(f)), jacfwd, jacrev, hessian,
and autodiff, jvp, hvp of a grad, batched or not), a kernel's GPU kernel (`gpu_kernels`) and a
host program (`host_program`: a device="cuda" function, or the derivative of such a function
or of a kernel's launch; runtime/host_program.py).

Keys and loading need no MLIR: a process whose code is all cached never imports the compiler
(compiler.py and derivative.py are imported on a miss only). A key's disk form hashes it on
top of the declaration's fingerprint (its Python source, that of what it calls, the globals
compiled in: source.fingerprint) and the compiler's. Two disks:
- CPU products: runtime/source_index.py records, under the key, the compiled module (kept in
  the CPU cache, runtime/cpu_cache.py) and the meta that calls it;
- GPU products: runtime/kernel_cache.py keeps their files under the key and the chip, in the
  folder its rule picks (find_or_compile), which compile_only() writes for another machine.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Sequence

from ..core.types import type_code
from ..runtime import profiling, source_index
from ..runtime.compiled_module import from_source_key
from ..runtime.source_index import relocated
from ..compiler.compiled import Compiled, LoadedDerivative, derivative_meta
from ..lang.functions import Function, Kernel, debug_enabled
from .gpu_target import chip, is_compile_only
from .guard import compiling
from ..lang.modes import BatchDuplicated, Mode, activity_key
from ..lang import interpreter, pytrees
from ..lang.source import code_sites, compiler_fingerprint, fingerprint

if TYPE_CHECKING:
    from ..core.kernel import GpuKernel
    from ..runtime.host_program import HostProgram, LoadedProgram
    from ..compiler.derivative import Derivative
    from ..lang.modes import Annotation


class Key(NamedTuple):
    """What one product of a declaration is compiled for: its memo's key, and on disk (`text`)
    the key of its entries. A tuple, so that its fields read as `key.debug` or `key[-1]`."""
    mode: Mode | None             # the derivative's mode; None: the declaration itself
    activity: tuple[str, ...]     # the derivative's activities, one per argument
    product: str                  # what is compiled: see _PRODUCTS
    types: tuple                  # the argument types
    ndim: int | None              # a kernel's ndrange rank; None for a function
    wgs: tuple[int, ...] | None   # a launch's workgroup size (a GPU kernel reads its own)
    chip: str | None              # the GPU architecture; None on the CPU
    debug: bool                   # ADJIT_DEBUG's checks compiled in

    def text(self, target: Function | Kernel, part: str = "") -> str:
        """What the disk key of this product of `target` (of its `part`: one of several
        kernels, or the transforms over it, _named) hashes: the key on the target's and the
        compiler's fingerprints."""
        return "\0".join([fingerprint(target), compiler_fingerprint(), target.kind,
                          *map(repr, (self.mode, self.activity, self.product,
                                      [type_code(t) for t in self.types], self.ndim, self.wgs,
                                      self.chip, self.debug)), part])

    def describe(self, target: Function | Kernel) -> str:
        """This product of `target`, as messages name it."""
        if self.product == "gpu-kernels":
            return f"kernel {target.__name__} for {list(self.types)} ({self.ndim}-D)"
        what = "call" if self.mode is None else f"{self.mode.name}({','.join(self.activity)})"
        over = "" if self.ndim is None else f" ({self.ndim}-D)"
        device = "on device='cuda'" if self.chip else "on the CPU"
        return f"{target.__name__} ({what}) for {list(self.types)}{over} {device}"


# The products, by Key.product.
_PRODUCTS = ("cpu", "derivative", "pullback", "gpu-kernels", "host-program", "transform")


# ---- the one path --------------------------------------------------------------------------
def _product(target: Function | Kernel, key: Key, memo: dict, disk: _CpuDisk | _GpuDisk,
             compile: Callable[[], Any]) -> Any:
    """The product `key` of `target`: from `memo`, else `disk` (which loads it, or compiles it
    with `compile()`, MLIR imported there, and stores it). Under compile_only() the GPU disk
    is asked to store even what the memo holds (it may have been compiled with the caches
    off); None where the disk gives nothing to run (a host program under compile_only())."""
    assert key.product in _PRODUCTS, key.product
    found = memo.get(key)
    if found is not None and not disk.stores_memoised():
        return found
    # (the profiler's and ADJIT_LOG=compile's account of it: runtime/profiling.py)
    with profiling.compile_span(lambda: key.describe(target)) as span:
        compiled = []

        def compile_now() -> Any:
            compiled.append(True)
            if "adjit.compiler.unit" not in sys.modules:
                # (the first compile of a process imports MLIR: a phase of its own)
                with profiling.phase("importing MLIR and the compiler"):
                    from ..compiler import unit  # noqa: F401
            return compiling(target, compile)
        value = disk.find_or_compile(target, key, found, compile_now)
        span.note(disk_cache="miss" if compiled else "hit")
    if value is not None:
        memo[key] = value
    return value


@dataclass(frozen=True)
class _CpuDisk:
    """CPU products in runtime/source_index.py: `from_record(target, module, meta)` makes one
    from its record without MLIR, `meta_of(built)` is what is recorded of a compiled one."""
    from_record: Callable[[Any, Any, dict], Any]
    meta_of: Callable[[Any], dict]

    @staticmethod
    def stores_memoised() -> bool:
        return False

    def find_or_compile(self, target, key: Key, memoised, compile: Callable[[], Any]) -> Any:
        named = _named(target)
        if named is None:      # nothing to key it on (a transform of no adjit function)
            return compile()
        declaration, chain = named
        with profiling.phase("keys and fingerprints"):   # (a process's first: ~10-40 ms)
            skey = source_index.key(key.text(declaration, chain))
        # The key leaves out where the code lives: the record says where its sources were,
        # and its checks are made to name the lines of `target`'s (source_index.relocated).
        sites = code_sites(declaration)
        with profiling.phase("disk cache"):
            found = from_source_key(skey, sites=sites)
            if found is not None:
                try:
                    return self.from_record(target, *found)
                except (KeyError, TypeError, ValueError):   # a record of another shape
                    pass
        built = compile()
        with profiling.phase("disk cache"):
            source_index.record(skey, built.module.key, built.adj_text, self.meta_of(built),
                                sites)
        return built


@dataclass(frozen=True)
class _GpuDisk:
    """GPU products in runtime/kernel_cache.py's folder, in files under keys of their parts
    (`parts`: a kernel each; one, "", for a host program): `load(folder, keys)` reads the
    stored form (None: a miss), `store(folder, keys, stored)` writes it, `ready(stored,
    folder, keys)` makes what runs of it (None: nothing runs here), `stored_of(value)` is the
    stored form of a memoised one, `at(stored, sites)` the stored form recording that its
    sources are at `sites` (source.code_sites), its checks' positions moved there from where
    it recorded (source_index.relocated: the key leaves out where the code lives). `keys`
    maps a part to its disk key."""
    parts: tuple[str, ...]
    load: Callable[[Path, dict[str, str]], Any]
    store: Callable[[Path, dict[str, str], Any], None]
    ready: Callable[[Any, Path | None, dict[str, str]], Any]
    stored_of: Callable[[Any], Any]
    at: Callable[[Any, tuple], Any]

    @staticmethod
    def stores_memoised() -> bool:
        # compile_only() is asked to store, even what this process compiled with the caches off.
        return is_compile_only()

    def find_or_compile(self, target, key: Key, memoised, compile: Callable[[], Any]) -> Any:
        from ..runtime import kernel_cache
        with profiling.phase("keys and fingerprints"):
            keys = {part: kernel_cache.cache_key(key.text(target, part), target.__name__,
                                                 key.chip)
                    for part in self.parts}
        sites = tuple(code_sites(target))
        # Where it is read from and written to, with the caches on or off: find_or_compile's rule.
        stored, folder = kernel_cache.find_or_compile(
            key.describe(target), lambda folder: self.load(folder, keys),
            lambda: self.at(self.stored_of(memoised) if memoised is not None else compile(),
                            sites),
            lambda folder, stored: self.store(folder, keys, stored),
            for_another_machine=is_compile_only())
        return self.ready(self.at(stored, sites), folder, keys)


# ---- CPU products --------------------------------------------------------------------------
_COMPILED = _CpuDisk(lambda target, module, meta: Compiled.from_meta(module, meta, target,
                                                                    module.source),
                     lambda c: c.meta)
_DERIVATIVES = _CpuDisk(lambda target, module, meta: LoadedDerivative(module, meta,
                                                                      target.__name__),
                        derivative_meta)


def cpu(target: Function | Kernel, types: Sequence, ndim: int | None = None,
        wgs: tuple[int, ...] | None = None) -> tuple[Key, Compiled]:
    """(the key, the compiled CPU specialisation) of `target` for argument `types`: a
    function's, or a kernel's launch over an `ndim`-D ndrange (workgroup size `wgs`)."""
    key = Key(None, (), "cpu", tuple(types), ndim, wgs, None, debug_enabled())

    def compile() -> Compiled:
        from ..compiler import unit as compiler
        if isinstance(target, Kernel):
            return compiler.build_kernel(target, list(types), ndim, wgs, key.debug)
        return compiler.build_function(target, list(types), key.debug)

    return key, _product(target, key, target._cache, _COMPILED, compile)


def derivative(target: Function | Kernel, mode: Mode, anns: Sequence[Annotation],
               types: Sequence, ndrange: tuple[int, ...] | None, wgs: tuple[int, ...] | None,
               pullback: bool = False) -> Derivative | LoadedDerivative:
    """The CPU derivative of `target` in `mode` for annotations `anns` and argument `types`
    (a kernel's: of its launch over `ndrange`); `pullback`: that of its inner product with a
    cotangent (derivative.Derivative). Memoised in the declaration's `_derivatives`."""
    interpreter.refuse_derivative(f"the derivative of {target.__name__}")
    key = Key(mode, activity_key(anns), "pullback" if pullback else "derivative",
              tuple(types), None if ndrange is None else len(ndrange), wgs, None,
              debug_enabled())

    def compile() -> Derivative:
        from ..compiler.derivative import Derivative
        return Derivative(target, mode, list(anns), list(types), ndrange, wgs,
                          pullback).compile_cpu()

    # (a dict of the instance's own, which a test may take away to see what compiles)
    memo = target.__dict__.setdefault("_derivatives", {})
    return _product(target, key, memo, _DERIVATIVES, compile)


def _transform_entry(g: Any, module: Any, meta: dict) -> Compiled:
    """A transform's entry from its record, with what the record keeps beside the call: for
    an autodiff of the transform, where its results go (`returns`, transform_calls.py)."""
    entry = Compiled.from_meta(module, meta, g, module.source)
    if "returns" in meta:
        entry.meta["returns"] = meta["returns"]
    return entry


_TRANSFORM_ENTRIES = _CpuDisk(_transform_entry, lambda c: c.meta)


def transform(g: Any, types: Sequence, mode: Mode | None = None,
              anns: Sequence[Annotation] = ()) -> Compiled:
    """The entry compiled whole for transform `g` (adjit.grad(adjit.grad(f)), a Jacobian,
    a Hessian) called from Python with argument `types`; with `mode`, that of
    `adjit.autodiff(mode, g, *anns)` (jvp and hvp of a grad), which takes each argument
    followed by its shadow or tangents and records where its results go (`returns`).
    Memoised on `g` (`g.compiled`, by this key); on disk under the innermost declaration's
    fingerprint and the transforms' attributes (_named), so that a later process loads it
    without MLIR."""
    interpreter.refuse_derivative(g.__name__)
    key = Key(mode, _activities(anns), "transform", tuple(types), None, None, None,
              debug_enabled())

    def compile() -> Compiled:
        from ..compiler.derivative_calls import compile_transform, compile_transform_autodiff
        if mode is None:
            return compile_transform(g, list(types))
        return compile_transform_autodiff(g, mode, list(anns), list(types))

    return _product(g, key, g.compiled, _TRANSFORM_ENTRIES, compile)


def _activities(anns: Sequence[Annotation]) -> tuple[str, ...]:
    """The activities of an autodiff of a transform, one per argument; a BatchDuplicated
    one's with its number of tangents (the entry takes each, and gives a result's tangents
    as a tuple of that many, even of one)."""
    return tuple(f"batch:{len(a.dval)}" if isinstance(a, BatchDuplicated) else a.activity
                 for a in anns)


# The transforms whose entries are kept on disk, by class (autodiff.py's; named, not imported:
# autodiff imports this module), each with every attribute that changes what is compiled.
_TRANSFORMS = {"Grad": ("argnums", "with_value"), "Jacobian": ("argnums", "reverse", "width")}


def _named(target: Any) -> tuple[Function | Kernel, str] | None:
    """(the declaration `target` is, or innermost in transform `target`; the transforms over
    it from the outside in, with their attributes: "" for a declaration), or None for a
    chain of other things."""
    links = []
    while not isinstance(target, (Function, Kernel)):
        cls = type(target)
        names = _TRANSFORMS.get(cls.__name__)
        if names is None or cls.__module__ != "adjit.api.autodiff":
            return None
        links.append(":".join([cls.__name__, *(repr(getattr(target, n)) for n in names)]))
        target = target.f
    return target, "/".join(links)


# ---- GPU products --------------------------------------------------------------------------
def _kernel_files(names: tuple[str, ...]) -> _GpuDisk:
    """The GPU disk of the kernels `names` (by name), each stored under its own key."""
    from ..runtime import kernel_cache

    def load(folder: Path, keys: dict[str, str]) -> dict[str, GpuKernel] | None:
        found = {name: kernel_cache.load(folder, keys[name]) for name in names}
        return None if None in found.values() else found

    def store(folder: Path, keys: dict[str, str], kernels: dict[str, GpuKernel]) -> None:
        for name in names:
            kernel_cache.store(folder, keys[name], kernels[name])

    def at(kernels: dict[str, GpuKernel], sites: tuple) -> dict[str, GpuKernel]:
        return {name: replace(k, checks=tuple(relocated(k.checks, k.sites, sites)),
                              sites=sites) for name, k in kernels.items()}

    return _GpuDisk(names, load, store, lambda kernels, folder, keys: kernels,
                    lambda kernels: kernels, at)


def gpu_key(k: Kernel, types: Sequence, ndim: int, debug: bool | None = None,
            target: str | None = None) -> Key:
    """The key of `k`'s GPU kernel for `types` and `ndim`."""
    return Key(None, (), "gpu-kernels", tuple(types), ndim, None,
               chip() if target is None else target,
               debug_enabled() if debug is None else debug)


def gpu_kernels(k: Kernel, types: Sequence, ndim: int) -> dict[str, GpuKernel]:
    """`k`'s PTX kernel for argument `types` and an `ndim`-D ndrange, as {"kernel": it}. (A
    launch's derivative is a host program: `host_program`.)"""
    key = gpu_key(k, types, ndim)

    def compile() -> dict[str, GpuKernel]:
        from ..compiler.unit import kernel_to_gpu
        return {"kernel": kernel_to_gpu(k, list(types), ndim, key.debug, key.chip)}

    return _product(k, key, k._cache, _kernel_files(("kernel",)), compile)


def gpu_kernel_key(k: Kernel, types: Sequence, ndim: int, debug: bool, target: str) -> str:
    """The disk-cache key of `k`'s own GPU kernel (gpu_kernels), computed without MLIR."""
    from ..runtime import kernel_cache
    key = gpu_key(k, types, ndim, debug=debug, target=target)
    return kernel_cache.cache_key(key.text(k, "kernel"), k.__name__, target)


def _host_programs() -> _GpuDisk:
    """The GPU disk of host programs: one entry (a shared object and its meta) each."""
    from ..runtime import host_program

    def load(folder: Path, keys: dict[str, str]) -> HostProgram | None:
        stored = host_program.load(folder, keys[""])
        return None if stored is None else stored[0]

    def ready(program: HostProgram, folder: Path | None,
              keys: dict[str, str]) -> LoadedProgram | None:
        if is_compile_only():          # stored for another machine; nothing runs here
            return None
        return host_program.LoadedProgram(program, None if folder is None else
                                          folder / f"{keys['']}.so")

    def at(program: HostProgram, sites: tuple) -> HostProgram:
        # (its kernels were compiled with it: their positions are in the program's sources)
        recorded = [tuple(site) for site in program.meta.get("sites", ())]

        def moved(table: tuple) -> tuple:
            return tuple(relocated(table, recorded, sites))
        return replace(program, errors=moved(program.errors),
                       kernels=tuple(replace(k, checks=moved(k.checks))
                                     for k in program.kernels),
                       meta={**program.meta, "sites": [list(site) for site in sites]})

    return _GpuDisk(("",), load, lambda folder, keys, program: host_program.store(
        folder, keys[""], program), ready, lambda loaded: loaded.program, at)


def compile_host_call(fn: Function, types: list, debug: bool,
                      target: str) -> tuple[str, str, HostProgram]:
    """`fn` for argument `types` compiled as a host program for chip `target`: (its adj text,
    its host code's LLVM IR, the program)."""
    from ..core.symbols import ENTRY
    from ..compiler.unit import function_unit, host_program as compile_program
    unit, results, is_tuple = function_unit(fn, types, debug, ENTRY)
    adj_text = str(unit.module)
    meta = {"tuple_result": is_tuple}
    if unit.entry_tree is not None:     # a tree result's structure (lang/pytrees.py)
        meta["tree"] = pytrees.to_record(unit.entry_tree)
    llvm_ir, program = compile_program(unit, fn.__name__, {ENTRY: (types, results)}, meta,
                                       target)
    return adj_text, llvm_ir, program


def host_program(target: Function | Kernel, types: Sequence, mode: Mode | None = None,
                 anns: Sequence[Annotation] = (), ndrange: tuple[int, ...] | None = None,
                 wgs: tuple[int, ...] | None = None) -> LoadedProgram | None:
    """The host program of `target` for argument `types`, loaded (None under compile_only()):
    a function's call, or its derivative in `mode` for `anns`; a kernel's launch derivative
    over an ndrange of `ndrange`'s rank in workgroups of `wgs` (the launch rule's block size,
    so part of the key), which the autodiff pass's launch rule makes as it does on the CPU."""
    if mode is not None:
        interpreter.refuse_derivative(f"the derivative of {target.__name__}")
    key = Key(mode, activity_key(anns), "host-program", tuple(types),
              None if ndrange is None else len(ndrange), wgs, chip(), debug_enabled())

    def compile() -> HostProgram:
        if mode is None:
            return compile_host_call(target, list(types), key.debug, key.chip)[2]
        from ..compiler.derivative import Derivative
        d = Derivative(target, mode, list(anns), list(types), ndrange, wgs)
        return d.host_program(target.__name__, key.chip)[1]

    return _product(target, key, target._cache, _host_programs(), compile)
