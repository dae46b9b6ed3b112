"""`@adjit.kernel`, `@adjit.func` and `@adjit.jit`: the declarations, their argument types
(`specialise`) and the Python call path.

A call computes the argument types, asks for the compiled specialisation for them, and calls
it. Declarations know no compiler: what compiles or runs on the GPU goes through the
`Routes` that adjit/__init__.py installs (api/calls.py, over the compile service,
service.py), so that decorating functions needs no MLIR; a call inside compiled code is the
compiler's (compiler/unit.py registers declarations with its registry of callables).
"""
from __future__ import annotations

import copy
import inspect
import math
import operator
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ..runtime import native_dispatch, profiling
from ..runtime.foreign import host_value
from ..core.errors import CompilationError
from ..core.threads import default_num_threads
from .source import SourceInfo, parse_source
from . import interpreter, pytrees, vector_values
from .structs import StructType, flatten_args, flatten_params, struct_type
from ..core.types import (ArrayType, ScalarType, VecArrayType, VecType, as_scalar_type,
                          type_of_value, unit_dims, weak_f64, weak_i64)


class Routes(Protocol):
    """Where declarations' calls go: to the compile service and the launchers
    (api/calls.py's, which adjit/__init__.py installs)."""

    def specialisation(self, target: Function | Kernel, types: list, ndim: int | None,
                       wgs: tuple[int, ...] | None) -> tuple[tuple, Any]:
        """(the key, the compiled CPU specialisation of `target` for `types`; a kernel's for
        an `ndim`-D ndrange and workgroup size `wgs`): compiled.Compiled, whose `call`,
        `invoke`, `convert_all` and `register_native` the call path uses."""

    def lower(self, target: Function | Kernel, types: list, ndim: int | None,
              wgs: tuple[int, ...] | None) -> Lowered:
        """`target.lower(...)` on the CPU, for argument `types`."""

    def run_on_gpu(self, fn: Function, args: tuple) -> Any:
        """`fn(*args, device="cuda")`."""

    def launch_on_gpu(self, k: Kernel, args: tuple, ndrange: tuple[int, ...],
                      wgs: tuple[int, ...] | None) -> None:
        """`k(*args, ndrange=..., workgroupsize=..., device="cuda")`."""

    def lower_on_gpu(self, target: Function | Kernel, args: tuple,
                     ndim: int | None) -> Lowered:
        """`target.lower(*args, device="cuda")`."""


_routes: list[Routes] = []


def install(routes: Routes) -> None:
    """Makes `routes` where declarations' calls go (adjit/__init__.py does, once)."""
    _routes[:] = [routes]


def routes() -> Routes:
    if not _routes:
        raise RuntimeError("adjit's compile service is not installed: import adjit")
    return _routes[0]


# Whether ADJIT_DEBUG is on, read at each call (a change at run time holds from the next
# call on): runtime/native_dispatch.py.
debug_enabled = native_dispatch.debug_enabled


def annotations_of(pyfn: Callable, source: SourceInfo | None = None) -> list:
    """Per parameter: an adjit type from its annotation, or None. A parameter adjit cannot
    take is a CompilationError at it in `source` (the parsed function)."""
    try:   # string annotations (`from __future__ import annotations`) are evaluated
        sig = inspect.signature(pyfn, eval_str=True)
    except Exception as e:
        raise TypeError(f"{pyfn.__qualname__}: cannot evaluate its annotations: {e}") from None
    out = []
    for p in sig.parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            message = (f"{pyfn.__qualname__}: parameter {p.name!r}: adjit takes plain "
                       "positional parameters only")
            if source is None:
                raise CompilationError(message)
            args = source.tree.args
            node = next((a for a in [*args.posonlyargs, *args.args, args.vararg,
                                     *args.kwonlyargs, args.kwarg]
                         if a is not None and a.arg == p.name), None)
            raise source.error(node, message)
        ann = p.annotation
        if ann is inspect.Parameter.empty:
            out.append(None)
        elif isinstance(ann, (ScalarType, ArrayType, VecType, VecArrayType)):
            out.append(ann)
        elif isinstance(ann, type) and struct_type(ann) is not None:
            out.append(struct_type(ann))
        elif pytrees.tree_annotation(ann) is not None:     # a tree (pytrees.py)
            out.append(pytrees.tree_annotation(ann))
        elif ann is float or ann is int:
            # Python's float and int: weak, as a Python scalar argument is (NEP 50, as
            # JAX's weak types); adjit.f64 or np.float64 is a typed f64.
            out.append(weak_f64 if ann is float else weak_i64)
        else:
            try:
                out.append(as_scalar_type(ann))
            except TypeError:
                raise TypeError(f"{pyfn.__qualname__}: parameter {p.name!r} has annotation "
                                f"{ann!r}, which is not an adjit type (adjit.f32, "
                                "adjit.Array[adjit.f32, 2], float, int, ...)") from None
    return out


# What a default parameter value may be: a constant the same in every call (a mutable or
# array default would be one object shared by all calls, which compiled code cannot see
# change).
_CONSTANTS = (bool, int, float, type(None))


def _constant(v) -> bool:
    if isinstance(v, tuple):
        return all(_constant(x) for x in v)
    return isinstance(v, _CONSTANTS) or isinstance(v, np.generic) and not isinstance(
        v, np.ndarray) and v.dtype.kind in "biuf"


def defaults_of(pyfn: Callable, source: SourceInfo) -> dict:
    """A function's default parameter values, by parameter name; a CompilationError at the
    parameter for one that is no constant (ints, floats, bools, None, tuples of those)."""
    out = {}
    for p in inspect.signature(pyfn).parameters.values():
        if p.default is inspect.Parameter.empty:
            continue
        if not _constant(p.default):
            node = next((a for a in source.tree.args.args if a.arg == p.name), None)
            raise source.error(node, f"{pyfn.__qualname__}: parameter {p.name!r} has the "
                                     f"default {type(p.default).__name__}: a default of a "
                                     "compiled function is a constant (an int, float, bool, "
                                     "None or a tuple of those); pass arrays as arguments")
        out[p.name] = p.default
    return out


def bind_arguments(target, args: tuple, kwargs: dict) -> tuple:
    """A call's arguments by position, keyword ones in their places and the defaults filled
    in (over the Python parameters, `target.struct_params`); TypeError as Python gives it."""
    params = target.struct_params
    if len(args) > len(params):
        raise TypeError(f"{target.__name__}() takes {len(params)} arguments "
                        f"({', '.join(params)}), got {len(args)}")
    out = list(args)
    for p in params[len(args):]:
        if p in kwargs:
            out.append(kwargs[p])
        elif p in target.defaults:
            out.append(target.defaults[p])
        else:
            raise TypeError(f"{target.__name__}() missing the argument {p!r}")
    for k in kwargs:
        if k not in params:
            takes = [f"{p}=" for p in params] + (["device="] if target.kind == "jit" else [])
            raise TypeError(f"{target.__name__}() got an unexpected keyword argument {k!r} "
                            f"(it takes {', '.join(takes)})")
        if params.index(k) < len(args):
            raise TypeError(f"{target.__name__}() got multiple values for argument {k!r}")
    return tuple(out)


def specialise(name: str, params: list[str], anns: list, args: Sequence,
               device: str = "cpu") -> tuple[list, list]:
    """Argument types and converted argument values, checked against annotations."""
    if len(args) != len(params):
        raise TypeError(f"{name}() takes {len(params)} arguments ({', '.join(params)}), "
                        f"got {len(args)}")
    types, values = [], []
    for p, ann, a in zip(params, anns, args):
        if isinstance(ann, pytrees.TreeAnnotation):     # (a tree goes to a variant)
            raise TypeError(f"{name}(): argument {p!r} is annotated {ann!r} but got "
                            f"{type(a).__name__}")
        if isinstance(ann, (VecType, VecArrayType)):
            t, a = _vector_argument(name, p, ann, a, device)
            types.append(t)
            values.append(a)
            continue
        try:
            a = host_value(a, device)    # a CPU array of another library: a NumPy view of it
            t = type_of_value(a, device)
        except TypeError as e:
            raise TypeError(f"{name}(): argument {p!r}: {e}") from None
        if isinstance(t, ArrayType):
            if isinstance(ann, ScalarType):
                raise TypeError(f"{name}(): argument {p!r} is annotated {ann!r} but got an array")
            if isinstance(ann, ArrayType) and ann.contiguous() != t.contiguous():
                raise TypeError(f"{name}(): argument {p!r} must be {ann!r}, got an array of "
                                f"dtype {a.dtype} with ndim {a.ndim}")
            # A strided array (a NumPy view, Fortran order) is taken as it is, by a
            # specialisation of its own (core/types.py). (GPU arrays come as DeviceArrays,
            # which cuda_launch checked are contiguous.)
        elif ann is not None:
            if isinstance(ann, ArrayType):
                raise TypeError(f"{name}(): argument {p!r} must be {ann!r}, got {type(a).__name__}")
            t = ann
            if ann.is_int and not _integral(a):
                # NumPy's same-kind rule: a float is never cast to an integer parameter
                # silently (np.int64(2.7) would truncate to 2 and index the wrong element).
                raise TypeError(f"{name}(): argument {p!r} is annotated {ann!r} but got "
                                f"{a!r} ({type(a).__name__}); pass an integer (int(...) "
                                "truncates)")
            try:
                a = ann.np_dtype.type(a)
            except (OverflowError, ValueError, TypeError) as e:
                raise type(e)(f"{name}(): argument {p!r}: cannot convert {a!r} to "
                              f"{ann!r}: {e}") from None
        elif isinstance(a, int) and not isinstance(a, bool) and not -2**63 <= a < 2**63:
            raise OverflowError(f"{name}(): argument {p!r}: {a} does not fit in int64")
        types.append(t)
        values.append(a)
    return types, values


def _integral(a) -> bool:
    """Whether `a` is an integer (Python int or bool, a NumPy integer) by type, as
    `operator.index` decides: a float of integral value is not."""
    try:
        operator.index(a)
    except TypeError:
        return False
    return True


def _vector_argument(name: str, p: str, ann: VecType | VecArrayType, a, device: str):
    """(type, value) of an argument for a parameter annotated with a vector type: a NumPy
    array (a vector: of its shape; an array of vectors: with its shape trailing), converted
    to the dtype only where it is a vector (an array of vectors is passed by reference, so
    it must be of the dtype already)."""
    vec = ann if isinstance(ann, VecType) else ann.vec
    what = f"{name}(): argument {p!r} ({ann!r})"
    if (isinstance(ann, VecType) and not hasattr(a, "__cuda_array_interface__") and
            not isinstance(a, np.ndarray)):
        a = np.asarray(a, dtype=vec.dtype.np_dtype)
    a = host_value(a, device)
    try:
        t = type_of_value(a, device)
    except TypeError as e:
        raise TypeError(f"{what}: {e}") from None
    want = vec.shape if isinstance(ann, VecType) else None
    shape = tuple(a.shape)
    if not isinstance(t, ArrayType):
        raise TypeError(f"{what}: got {type(a).__name__}, not an array")
    if isinstance(ann, VecType) and shape != want:
        raise ValueError(f"{what}: got an array of shape {shape}, not {want}")
    if isinstance(ann, VecArrayType) and (t.ndim != ann.array.ndim or
                                          shape[ann.ndim:] != vec.shape):
        raise ValueError(f"{what}: needs an array of {ann.array.ndim} dimensions whose "
                         f"trailing ones are {vec.shape}, got shape {shape}")
    if t.dtype != vec.dtype:
        if isinstance(ann, VecArrayType):
            raise TypeError(f"{what}: needs dtype {vec.dtype.np_dtype}, got {a.dtype}")
        a = a.astype(vec.dtype.np_dtype)
        t = type_of_value(a, device)
    return t, a


def _signature(args: tuple) -> tuple:
    """What a call's specialisation depends on, cheaply: each array's dtype, rank, whether
    it is C-contiguous and which dimensions are 1, each other
    argument's Python type (the annotation does the rest)."""
    return tuple((a.dtype, a.ndim, a.flags.c_contiguous, 1 in a.shape and unit_dims(a.shape))
                 if type(a) is np.ndarray else type(a) for a in args)


def _fast_path(memo: dict, cache: dict, signature, args: tuple) -> tuple | None:
    """(the invoker of the compiled specialisation a call with this `signature` got before,
    `args` converted by it); None where there is none, it is no longer the one `cache` holds for
    its key (the cache was cleared), ADJIT_DEBUG changed, or the conversion refuses an
    argument: the full path then specialises (and gives the messages of record: a
    non-contiguous array, a value that does not fit), before anything has run. Saves specialise's per-argument checks (~2 us of an 8 us
    kernel call)."""
    hit = memo.get(signature)
    if hit is None:
        return None
    key, compiled = hit
    if key[-1] != debug_enabled() or cache.get(key) is not compiled:
        return None
    try:
        return compiled.invoke, compiled.convert_all(args)
    except Exception:
        return None


def _keywords(what: str, given: dict, defaults: dict) -> dict:
    """`defaults` updated by the call's keyword arguments `given`; TypeError naming the
    function for one it does not take (the call goes through native_dispatch's __call__,
    whose Python half takes **kwargs)."""
    extra = sorted(set(given) - set(defaults))
    if extra:
        raise TypeError(f"{what}() got an unexpected keyword argument {extra[0]!r} (it takes "
                        f"{', '.join(f'{k}=' for k in defaults)})")
    return {**defaults, **given}


def _checked_device(device: str, what: str) -> str:
    if device not in ("cpu", "cuda"):
        raise ValueError(f"{what}: device must be 'cpu' or 'cuda', got {device!r}")
    return device


def interpreted_arguments(target, args: tuple) -> tuple:
    """A call's arguments (by Python parameter) as the interpreter mode passes them to the
    Python function, checked and converted as a compiled call takes them: an annotated
    scalar in its type (an ``int``/``float`` annotation a Python int/float: weak), a vector
    as vector_values makes it, arrays (another library's CPU array: a NumPy view of it),
    structs and trees as they are."""
    params = target.struct_params
    if len(args) != len(params):
        raise TypeError(f"{target.__name__}() takes {len(params)} arguments "
                        f"({', '.join(params)}), got {len(args)}")
    out = []
    for p, ann, a in zip(params, target._python_annotations(), args):
        if struct_type(a) is not None:
            out.append(vector_values.interpreted_struct(a))
            continue
        if isinstance(ann, (StructType, pytrees.TreeAnnotation)) or (
                ann is None and pytrees.is_tree(a)):
            out.append(a)     # (a struct annotation given another value: Python's error)
            continue
        (t,), (v,) = specialise(target.__name__, [p], [ann], [a])
        out.append(vector_values.interpreted(ann, t, v))
    return tuple(out)


class Lowered:
    """What `f.lower(...)` returns: the IR of each stage, as text."""

    def __init__(self, adj_text: str, llvm_text: Callable[[], str],
                 ptx_text: Callable[[], str] | None = None):
        self._adj, self._llvm, self._ptx = adj_text, llvm_text, ptx_text

    def adj(self) -> str:
        return self._adj

    def llvm(self) -> str:
        return self._llvm()

    def ptx(self) -> str:
        if self._ptx is None:
            raise ValueError("PTX exists for device='cuda' only: lower(..., device='cuda')")
        return self._ptx()


class _Decorated:
    """What every decorated function keeps: the Python function, its parsed source, its
    parameters with their annotations, and its compiled specialisations."""
    kind = ""

    def __init__(self, pyfn: Callable):
        self.pyfn = pyfn
        self.__name__ = pyfn.__name__
        self.__doc__ = pyfn.__doc__
        self.__wrapped__ = pyfn
        self.source = parse_source(pyfn)
        self.params = list(inspect.signature(pyfn).parameters)
        self.annotations = annotations_of(pyfn, self.source)
        # Per Python parameter, whether a tuple, list, dict or NamedTuple argument is a tree
        # (pytrees.py) there: not where a vector or struct annotation takes it.
        self._tree_ok = tuple(not isinstance(a, (VecType, VecArrayType, StructType))
                              for a in self.annotations)
        # A variant's tree structures, per Python parameter (TreeDef or None); None: not a
        # variant (with_trees)
        self.tree_layout = None
        # Default parameter values (`def f(x, scale=2.0)`), by Python parameter name
        self.defaults = defaults_of(pyfn, self.source)
        # A struct parameter is its fields (structs.py): `params` and `annotations` are
        # theirs, `struct_params` the Python parameters and `struct_layout` each one's
        # StructType or None (None throughout: no struct parameter).
        self.struct_params, self.struct_layout = self.params, None
        self._py_annotations = list(self.annotations)    # (per Python parameter)
        if any(isinstance(a, StructType) for a in self.annotations):
            self.params, self.annotations, self.struct_layout = flatten_params(
                self.params, self.annotations)
        # call signature (_signature) -> (its key in _cache, the Compiled it ran): _fast_path
        self._fast: dict = {}
        # Native calls of what _fast holds (runtime/native_dispatch.py; None: the Python path)
        self._native = native_dispatch.dispatcher() if self.struct_layout is None else None
        self._cache = {}

    @property
    def _cache(self) -> dict:
        """The compiled specialisations, by (types, ..., debug). Replacing the dict (as a
        test does to compile again, as a new process would) forgets the calls recorded for
        the fast paths too, which would otherwise go on running the old code."""
        return self._specialisations

    @_cache.setter
    def _cache(self, value: dict) -> None:
        self._specialisations = value
        self._fast.clear()
        if self._native is not None:
            self._native.clear()

    def __repr__(self) -> str:
        return f"<adjit.{self.kind} {self.__name__}>"

    def with_trees(self, layout: tuple) -> _Decorated:
        """The variant of this declaration for arguments of the tree structures `layout`
        (per Python parameter, a pytrees.TreeDef or None): a declaration of its own, kept
        here, whose parameters are the trees' leaves, named by their paths
        (`params['W1']`), and whose struct leaves are struct parameters (structs.py)."""
        variants = self.__dict__.setdefault("_variants", {})
        v = variants.get(layout)
        if v is not None:
            return v
        v = copy.copy(self)
        for k in ("_variants", "_derivatives", "_transforms"):
            v.__dict__.pop(k, None)
        # (in this order: the _cache setter clears _fast and _native, which are the
        # original's until replaced)
        v._fast, v._native = {}, None
        v._cache = {}
        names, anns = [], []
        for p, ann, tree in zip(self.struct_params, self._python_annotations(), layout):
            if tree is None:
                names.append(p)
                anns.append(ann)
                continue
            for path, leaf in zip(pytrees.paths(tree, p), _leaf_nodes(tree)):
                names.append(path)
                anns.append(leaf)
        v.tree_layout = layout
        v.struct_params, v.struct_layout, v._py_annotations = names, None, anns
        v.params, v.annotations = names, anns
        v._tree_ok = tuple(not isinstance(a, (VecType, VecArrayType, StructType))
                           for a in anns)
        if any(isinstance(a, StructType) for a in anns):
            v.params, v.annotations, v.struct_layout = flatten_params(names, anns)
        else:     # (its calls come with the leaves: the native dispatcher takes them)
            v._native = native_dispatch.dispatcher()
        variants[layout] = v
        return v

    def _python_annotations(self) -> list:
        """The annotation of each Python parameter (a struct's StructType, not its
        fields')."""
        return list(self._py_annotations)

    def _tree_call(self, args: tuple) -> tuple | None:
        """(the variant for the trees among `args`, the arguments with each tree replaced
        by its leaves), or None where no argument is a tree."""
        if (self.tree_layout is not None or not pytrees.has_tree(args) or
                len(args) != len(self._tree_ok) or
                not any(ok and pytrees.is_tree(a) for ok, a in zip(self._tree_ok, args))):
            return None
        layout, flat = [], []
        for p, ok, a, ann in zip(self.struct_params, self._tree_ok, args,
                                 self._python_annotations()):
            if isinstance(ann, pytrees.TreeAnnotation) and not ann.accepts(a):
                raise TypeError(f"{self.__name__}(): argument {p!r} is annotated {ann!r} but "
                                f"got {type(a).__name__}")
            if not (ok and pytrees.is_tree(a)):
                layout.append(None)
                flat.append(a)
                continue
            try:
                tree = pytrees.python_structure(a)
            except TypeError as e:
                raise TypeError(f"{self.__name__}(): argument {p!r}: {e}") from None
            layout.append(tree)
            flat.extend(leaf for _, leaf in pytrees.leaves(tree, a))
        return self.with_trees(tuple(layout)), tuple(flat)


def _leaf_nodes(tree: pytrees.TreeDef) -> list:
    """Each leaf's annotation in a variant: its StructType for a struct, else None."""
    if tree.kind == "leaf":
        return [tree.node]
    return [n for c in tree.children for n in _leaf_nodes(c)]


class Function(_Decorated):
    """What ``@adjit.func`` (a device function, callable from kernels) and ``@adjit.jit`` (a
    host function: arrays, launches) make. Both can be called from Python.

    Calling it, ``f(*args)`` (and ``f(*args, device="cuda")`` for an ``@adjit.jit``
    function), compiles it for the arguments' types at the first call of each and runs it.
    ``f.lower(*args)`` returns a ``Lowered`` whose ``.adj()`` and ``.llvm()`` (and
    ``.ptx()`` with ``device="cuda"``) are the IR of each stage, as text, without running it.
    ``f.pyfn`` is the Python function, which still runs as plain Python.

    Example:
        ::

            import adjit

            @adjit.jit
            def cube(x: adjit.f64) -> adjit.f64:
                return x * x * x

            assert isinstance(cube, adjit.Function)
            print(cube(2.0), cube.pyfn(2.0))      # 8.0 8.0
            ir = cube.lower(2.0).adj()               # the adj IR, as text
            assert "func.func" in ir, ir
            print(ir)
    """
    # f(*args, device=None): native dispatch, else _call_python
    __call__ = native_dispatch.function_call

    def __init__(self, pyfn: Callable, kind: str, device: str = "cpu"):
        super().__init__(pyfn)
        self.kind = kind
        self.device = _checked_device(device, f"@adjit.{kind} {self.__name__}")
        self.rules = {}    # custom derivative rules (adjit.rules), by kind

    def _device(self, device: str | None) -> str:
        if device is None:
            return self.device
        if self.kind != "jit":
            raise TypeError(f"{self.__name__} is an @adjit.func: it runs where the kernel "
                            "or function calling it runs, and takes no device=")
        return _checked_device(device, self.__name__)

    def _call_python(self, *args, **kwargs):
        """Runs the function; with device="cuda" its kernel launches run on the GPU
        (cuda_jit.py). `__call__` (native_dispatch.function_call) comes here for what the
        native dispatcher does not take."""
        device = kwargs.pop("device", None)
        if kwargs or self.defaults and len(args) < len(self.struct_params):
            args = bind_arguments(self, args, kwargs)
        if interpreter.interpreting():
            return self._interpret(args, device)
        # Trees among the arguments go to their leaves' variant: looked for after the fast
        # path (whose signatures hold no trees), or before a struct's fields replace it.
        tree_call = self._tree_call(args) if self.struct_layout is not None else None
        if tree_call is None and self.struct_layout is not None:
            args = flatten_args(self, args)
        if device is None and tree_call is None:
            fast = _fast_path(self._fast, self._cache, _signature(args), args)
            if fast is not None:
                invoke, values = fast
                return invoke(values)
        if tree_call is None and self.struct_layout is None:
            tree_call = self._tree_call(args)
        if tree_call is not None:
            variant, flat = tree_call
            return variant(*flat, device=device)
        if self._device(device) == "cuda":
            return routes().run_on_gpu(self, args)
        types, values = specialise(self.__name__, self.params, self.annotations, args)
        key, compiled = routes().specialisation(self, types, None, None)
        result = compiled.call(*values)
        if device is None:
            signature = _signature(args)
            if signature not in self._fast:
                compiled.register_native(self._native, args)
            self._fast[signature] = (key, compiled)
        return result

    def _interpret(self, args: tuple, device: str | None):
        """The call in the interpreter mode: the Python function run on the arguments."""
        if self._device(device) == "cuda":
            raise RuntimeError(f"{self.__name__}(..., device='cuda'): the interpreter mode "
                               "runs on the CPU only; call it without device='cuda'")
        return interpreter.returned(self.pyfn(*interpreted_arguments(self, args)))

    def lower(self, *args, device: str | None = None, **kwargs) -> Lowered:
        if kwargs or self.defaults and len(args) < len(self.struct_params):
            args = bind_arguments(self, args, kwargs)
        tree_call = self._tree_call(args)
        if tree_call is not None:
            variant, flat = tree_call
            return variant.lower(*flat, device=device)
        if self.struct_layout is not None:
            args = flatten_args(self, args)
        if self._device(device) == "cuda":
            return routes().lower_on_gpu(self, args, None)
        types, _ = specialise(self.__name__, self.params, self.annotations, args)
        return routes().lower(self, types, None, None)


def ndrange_tuple(ndrange, name: str) -> tuple[int, ...]:
    if ndrange is None:
        raise TypeError(f"launching kernel {name} needs ndrange= (an int or a tuple of ints)")
    items = tuple(ndrange) if isinstance(ndrange, (tuple, list)) else (ndrange,)
    if not items:
        raise ValueError(f"kernel {name}: ndrange must have at least one dimension")
    out = []
    for n in items:
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"kernel {name}: ndrange entries must be ints, got {n!r}")
        if n < 0:
            raise ValueError(f"kernel {name}: ndrange entries must be >= 0, got {n}")
        out.append(int(n))
    return tuple(out)


def workgroup_tuple(wgs, ndim: int, name: str) -> tuple[int, ...] | None:
    if wgs is None:
        return None
    items = tuple(wgs) if isinstance(wgs, (tuple, list)) else (wgs,)
    if not all(isinstance(w, (int, np.integer)) and not isinstance(w, bool) and w > 0
               for w in items):
        raise ValueError(f"kernel {name}: workgroupsize must be positive ints, got {wgs!r}")
    if len(items) not in (1, ndim):
        raise ValueError(f"kernel {name}: workgroupsize has {len(items)} entries for a "
                         f"{ndim}-D ndrange")
    return tuple(int(w) for w in items)


class Kernel(_Decorated):
    """What ``@adjit.kernel`` makes: a function run once per point of an index space.

    ``k(*args, ndrange=n, workgroupsize=None, device="cpu")`` launches it (``ndrange``: an
    int or a tuple of ints; ``device="cuda"`` runs it on the GPU); ``k.lower(*args,
    ndrange=n)`` returns its IR at each stage without running it.

    Raises:
        TypeError: launching without ``ndrange=``, or with non-int entries.
        ValueError: an ``ndrange`` entry below 0, or an empty ``ndrange``.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.kernel
            def outer(a: Array[f64, 1], b: Array[f64, 1], out: Array[f64, 2]):
                i, j = adjit.index_nd()
                out[i, j] = a[i] * b[j]

            out = np.zeros((2, 3))
            outer(np.array([1.0, 2.0]), np.arange(3.0), out, ndrange=(2, 3))
            print(out)
            try:
                outer(np.ones(2), np.ones(3), out)
            except TypeError as e:
                print(e)   # launching kernel outer needs ndrange= (an int or a tuple of ints)
    """
    kind = "kernel"
    # k(*args, ndrange=..., workgroupsize=None, device="cpu"): native dispatch, else
    # _call_python
    __call__ = native_dispatch.kernel_call

    def _check_device(self, device: str) -> str:
        return _checked_device(device, f"kernel {self.__name__}")

    def _call_python(self, *args, **kwargs):
        """Launches the kernel (`__call__`, native_dispatch.kernel_call, comes here for what
        the native dispatcher does not take)."""
        kw = _keywords(f"kernel {self.__name__}", kwargs,
                       {"ndrange": None, "workgroupsize": None, "device": "cpu"})
        ndrange, workgroupsize, device = kw["ndrange"], kw["workgroupsize"], kw["device"]
        if interpreter.interpreting():
            return self._interpret(args, ndrange, workgroupsize, device)
        # (trees: as Function._call_python looks for them)
        tree_call = self._tree_call(args) if self.struct_layout is not None else None
        if tree_call is None and self.struct_layout is not None:
            args = flatten_args(self, args)
        nd = ndrange_tuple(ndrange, self.__name__)
        wgs = workgroup_tuple(workgroupsize, len(nd), self.__name__)
        if device == "cpu" and tree_call is None:
            fast = _fast_path(self._fast, self._cache, (_signature(args), len(nd), wgs),
                              args + nd)
            if fast is not None:
                invoke, values = fast
                invoke(values)
                return
        if tree_call is None and self.struct_layout is None:
            tree_call = self._tree_call(args)
        if tree_call is not None:
            variant, flat = tree_call
            return variant(*flat, **kwargs)
        if self._check_device(device) == "cuda":
            return routes().launch_on_gpu(self, args, nd, wgs)
        types, values = specialise(self.__name__, self.params, self.annotations, args)
        key, compiled = routes().specialisation(self, types, len(nd), wgs)
        compiled.call(*values, *nd)
        signature = (_signature(args), len(nd), wgs)
        if signature not in self._fast and wgs is None:
            compiled.register_native(self._native, args, len(nd))
        self._fast[signature] = (key, compiled)

    def _interpret(self, args: tuple, ndrange, workgroupsize, device: str) -> None:
        """The launch in the interpreter mode: the Python function run once per work item
        (interpreter.launch); the workgroup size is checked and has no other effect."""
        nd = ndrange_tuple(ndrange, self.__name__)
        workgroup_tuple(workgroupsize, len(nd), self.__name__)
        if self._check_device(device) == "cuda":
            raise RuntimeError(f"kernel {self.__name__} (device='cuda'): the interpreter "
                               "mode runs on the CPU only; launch it without device='cuda'")
        interpreter.launch(self.__name__, self.pyfn, interpreted_arguments(self, args), nd)

    def lower(self, *args, ndrange=None, workgroupsize=None, device: str = "cpu") -> Lowered:
        tree_call = self._tree_call(args)
        if tree_call is not None:
            variant, flat = tree_call
            return variant.lower(*flat, ndrange=ndrange, workgroupsize=workgroupsize,
                                 device=device)
        if self.struct_layout is not None:
            args = flatten_args(self, args)
        nd = ndrange_tuple(ndrange, self.__name__)
        wgs = workgroup_tuple(workgroupsize, len(nd), self.__name__)
        if self._check_device(device) == "cuda":
            return routes().lower_on_gpu(self, args, len(nd))
        types, _ = specialise(self.__name__, self.params, self.annotations, args)
        return routes().lower(self, types, len(nd), wgs)


def _profiled_function_call(self: Function, *args, **kwargs):
    """`Function.__call__` while a profile is open (runtime/profiling.py): the Python path,
    recorded as a "call"."""
    if profiling.ACTIVE is None:     # (the last profile closed while this call was on its way)
        return self._call_python(*args, **kwargs)
    device = kwargs.get("device") or self.device
    with profiling.span(self.__name__, "call", device=device,
                        threads=default_num_threads() if device == "cpu" else None) as s:
        out = self._call_python(*args, **kwargs)
        s.args["result_bytes"] = profiling.result_bytes(out)
    return out


def _profiled_kernel_call(self: Kernel, *args, **kwargs):
    """`Kernel.__call__` while a profile is open: the Python path, recorded as a "launch"
    with its ndrange, work items, device and (on the CPU) the thread pool's threads."""
    if profiling.ACTIVE is None:
        return self._call_python(*args, **kwargs)
    nd = kwargs.get("ndrange")
    nd = list(nd) if isinstance(nd, (tuple, list)) else [nd]
    device = kwargs.get("device", "cpu")
    items = math.prod(nd) if all(isinstance(n, (int, np.integer)) for n in nd) else None
    with profiling.span(self.__name__, "launch", ndrange=nd, work_items=items, device=device,
                        threads=default_num_threads() if device == "cpu" else None):
        return self._call_python(*args, **kwargs)


def _route_calls(_on: bool = False) -> None:
    """While a profile is open, every call of a declaration takes the Python path, which
    records it; while the interpreter mode is on, the Python path, which interprets; when
    neither is, the native dispatcher's methods are back, unchanged (so neither costs a
    call anything when off)."""
    if profiling.ACTIVE is not None:
        Function.__call__, Kernel.__call__ = _profiled_function_call, _profiled_kernel_call
    elif interpreter.routed():      # (the Python path is what interprets)
        Function.__call__, Kernel.__call__ = Function._call_python, Kernel._call_python
    else:
        Function.__call__ = native_dispatch.function_call
        Kernel.__call__ = native_dispatch.kernel_call


profiling.on_toggle(_route_calls)
interpreter.on_toggle(_route_calls)


def kernel(pyfn: Callable) -> Kernel:
    """``@adjit.kernel``: a function run once per point of an index space, in parallel.

    A kernel writes its results into array arguments and returns nothing. Inside it,
    ``adjit.index()`` is the work item's flat index, ``adjit.index_nd()`` its
    indices over a multi-dimensional ``ndrange``, and ``adjit.atomic_add(arr, idx, v)``
    adds safely into an element that several items write. Parameters are annotated
    (``adjit.Array[adjit.f64, 1]``, ``adjit.f64``, ...) or take their types from the
    arguments of the first launch; each new combination of types compiles once.

    Launch it with ``k(*args, ndrange=n)`` (an int or a tuple of ints; required), optionally
    ``workgroupsize=`` and ``device="cuda"``. ``k.lower(*args, ndrange=n)`` returns the
    compiled IR of each stage without running it.

    Args:
        pyfn: the Python function. Its source must be in a file (or a notebook cell): adjit
            compiles it from its source, so a function typed at ``python -c`` or ``exec``
            cannot be compiled.

    Returns:
        Kernel: the kernel; nothing is compiled before its first launch.

    Raises:
        CompilationError: at the first launch, for code adjit cannot compile (it names the
            file, line and column); a kernel with a ``return`` value is refused.
        TypeError: at a launch without ``ndrange=`` ("launching kernel k needs ndrange= (an
            int or a tuple of ints)"), or with arguments of the wrong kind.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.kernel
            def saxpy(a: f64, x: Array[f64, 1], y: Array[f64, 1]):
                i = adjit.index()
                y[i] = a * x[i] + y[i]

            x, y = np.arange(4.0), np.ones(4)
            saxpy(2.0, x, y, ndrange=len(x))
            print(y)   # [1. 3. 5. 7.]
    """
    return Kernel(pyfn)


def jit(pyfn: Callable | None = None, *, device: str = "cpu") -> Function | Callable:
    """``@adjit.jit``: a compiled host function, called from Python like the function itself.

    Its body may hold control flow, scalars, array creation (``adjit.zeros``, ...),
    element-wise array arithmetic, NumPy functions and reductions, calls of other compiled
    functions and kernel launches; it returns scalars, arrays (as NumPy arrays) or tuples of
    them. Its arguments and results may be pytrees: tuples, lists, dicts and NamedTuples,
    nested, of arrays, scalars and structs (``params["W"]``, ``p.W``, ``.items()`` and dict
    comprehensions compile; each tree structure is a specialisation of its own). It compiles at the first call for the argument types given (and again for new
    ones), and is differentiable (:func:`adjit.grad`, :func:`adjit.autodiff`, ...).
    ``f.lower(*args)`` returns its IR at each stage without running it.

    Args:
        pyfn: the Python function; its source must be in a file or a notebook cell.
        device: ``"cpu"`` (the default) or ``"cuda"``: where its kernel launches run when it
            is called from Python without ``device=`` (called from compiled code, it runs
            where its caller runs). ``@adjit.jit(device="cuda")`` is the decorator form.

    Returns:
        Function: the compiled function (or, when called with ``device=`` only, the
        decorator making one).

    Raises:
        CompilationError: at the first call, for code adjit cannot compile (with the file,
            line and column, and what to write instead).
        ValueError: for a ``device`` other than ``"cpu"`` or ``"cuda"``.

    Example:
        ::

            import numpy as np
            import adjit

            @adjit.jit
            def rms(x: adjit.Array[adjit.f64, 1]) -> adjit.f64:
                return adjit.sqrt(adjit.sum(x * x) / x.shape[0])

            print(rms(np.array([3.0, 4.0])))   # 3.5355...

            @adjit.jit
            def scaled(params, x):             # params: a dict (a pytree)
                return {k: v * x for k, v in params.items()}

            out = scaled({"a": np.ones(2), "b": np.arange(2.0)}, 2.0)
            print(out)                         # {'a': array([2., 2.]), 'b': array([0., 2.])}
    """
    if pyfn is None:
        return lambda f: Function(f, "jit", device)
    return Function(pyfn, "jit", device)


def device_function(pyfn: Callable) -> Function:
    """``@adjit.func``: a device function, callable from kernels, ``@adjit.jit`` functions and
    other ``@adjit.func`` functions (compiled into its caller), and from Python.

    It takes and returns scalars, small vectors and arrays, and may carry custom derivative
    rules (:mod:`adjit.rules`). Called from Python it compiles and runs like an
    ``@adjit.jit`` function.

    Args:
        pyfn: the Python function; its source must be in a file or a notebook cell.

    Returns:
        Function: the device function.

    Raises:
        CompilationError: when it (or a caller) is compiled, for code adjit cannot compile.
        TypeError: ``f(..., device=...)``: an ``@adjit.func`` runs where its caller runs.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.func
            def smoothstep(t: f64) -> f64:
                t = adjit.clip(t, 0.0, 1.0)
                return t * t * (3.0 - 2.0 * t)

            @adjit.kernel
            def apply(x: Array[f64, 1]):
                i = adjit.index()
                x[i] = smoothstep(x[i])

            x = np.array([-1.0, 0.5, 2.0])
            apply(x, ndrange=3)
            print(x, smoothstep(0.25))   # [0.  0.5 1. ] 0.15625
    """
    return Function(pyfn, "func")
