"""Errors: code adjit cannot compile raises adjit.CompilationError naming the construct and
the user's file and line (`.filename`, `.lineno`); bad calls from Python raise TypeError or
ValueError saying what is wrong. Each marked line below is where the error must point."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import adjit
from fe_helpers import marker_line


def line_of(marker: str) -> int:
    return marker_line(__file__, marker)


def expect_compile_error(call, marker: str, *words: str) -> adjit.CompilationError:
    """`call()` raises a CompilationError at the line marked `marker` whose message names
    the file and line and contains each of `words`."""
    with pytest.raises(adjit.CompilationError) as info:
        call()
    e = info.value
    line = line_of(marker)
    assert e.filename == __file__
    assert e.lineno == line, (e.lineno, line, str(e))
    assert f"{__file__}:{line}:" in str(e)
    for w in words:
        assert w.lower() in str(e).lower(), (w, str(e))
    return e


X = np.arange(4.0)


# ---- unsupported Python --------------------------------------------------------------------

def test_list_comprehension():
    @adjit.jit
    def f(x):
        s = 0.0
        s += sum([v for v in range(3)])  # listcomp
        return s

    expect_compile_error(lambda: f(X), "listcomp", "ListComp")


def test_generator_and_dict_comprehension():
    @adjit.func
    def g(n):
        return max(i * i for i in range(n))  # genexp

    @adjit.func
    def h(n):
        d = {i: i for i in range(n)}  # dictcomp
        return n

    expect_compile_error(lambda: g(3), "genexp", "GeneratorExp")
    expect_compile_error(lambda: h(3), "dictcomp", "DictComp")


def test_try():
    @adjit.kernel
    def k(x):
        i = adjit.index()
        try:  # try
            x[i] = 1.0
        except Exception:
            pass

    expect_compile_error(lambda: k(X, ndrange=4), "try", "Try")


@pytest.mark.parametrize("source, construct", [
    ("with open('f') as fh:\n        pass", "With"),
    ("f = lambda v: v", "Lambda"),
    ("del a", "Delete"),
    ("raise ValueError('no')", "Raise"),
    ("assert a > 0", "Assert"),
    ("import os", "Import"),
    ("def inner():\n        return 1", "FunctionDef"),
    ("b = 'text' + 'more'", "str"),
    ("b = [1, 2, 3][a]", "index"),
    ("b = {**{1: 2}}", "**d in a dict display"),
    ("b = {a: 2}", "constant keys"),
    ("b = a if a else None", "None"),
    ("b = a @ a", "MatMult"),
    ("b = a is a", "Is"),
    ("b = a in (1, 2)", "In"),
    ("b = f'{a}'", "JoinedStr"),
    ("for v in a:\n        pass", "range"),      # (a list known while compiling unrolls)
    ("for v in range(3):\n        pass\n    else:\n        pass", "else"),
    ("while a < 0:\n        a += 1\n    else:\n        pass", "else"),
])
def test_other_unsupported_constructs(tmp_path, source, construct):
    # Written to a file of its own so that the expected line is known: line 4.
    path = tmp_path / "user_code.py"
    path.write_text("import adjit\n\n@adjit.func\ndef f(a):\n    " + source + "\n    return a\n")
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    with pytest.raises(adjit.CompilationError) as info:
        namespace["f"](1)
    e = info.value
    assert (e.filename, e.lineno) == (str(path), 5), str(e)
    assert f"{path}:5:" in str(e)
    assert construct.lower() in str(e).lower(), str(e)


def test_boolean_mask_indexing_is_refused():
    @adjit.jit
    def f(x):
        return x[x > 0.5]  # fancy

    expect_compile_error(lambda: f(X), "fancy", "boolean array (a mask)")


# ---- unknown functions and names ---------------------------------------------------------

def plain_python_helper(v):
    return v + 1


def test_call_to_a_plain_python_function():
    @adjit.kernel
    def k(x):
        i = adjit.index()
        x[i] = plain_python_helper(x[i])  # plain-call

    e = expect_compile_error(lambda: k(X, ndrange=4), "plain-call", "plain_python_helper")
    assert "@adjit.func" in str(e)   # says what would work


def test_call_to_an_unknown_library_function():
    @adjit.jit
    def f(x):
        return np.fft.fft(x)  # numpy-call   (np.linalg.norm compiles now)

    expect_compile_error(lambda: f(X), "numpy-call", "fft")


def test_undefined_name():
    @adjit.func
    def f(a):
        return a + not_defined_anywhere  # undefined  # noqa: F821

    expect_compile_error(lambda: f(1.0), "undefined", "not_defined_anywhere")


GLOBAL_ARRAY = np.ones(3)


def test_global_array():
    @adjit.func
    def f(i):
        return GLOBAL_ARRAY[i]  # global-array

    expect_compile_error(lambda: f(0), "global-array", "GLOBAL_ARRAY", "argument")


def test_unknown_attribute():
    @adjit.func
    def f(a):
        return math.not_a_function(a)  # bad-attr

    expect_compile_error(lambda: f(1.0), "bad-attr", "not_a_function")


# ---- type clashes ------------------------------------------------------------------------

def test_float_index():
    @adjit.kernel
    def k(x):
        i = adjit.index()
        x[i * 0.5] = 1.0  # float-index

    expect_compile_error(lambda: k(X, ndrange=4), "float-index", "index", "integer")


def test_array_and_scalar_in_one_variable_across_branches():
    @adjit.jit
    def f(x, c):
        y = x
        if c > 0:
            y = 1.0
        return y  # clash-branch

    with pytest.raises(adjit.CompilationError) as info:
        f(X, 1)
    e = info.value
    assert e.filename == __file__
    assert line_of("clash-branch") - 3 <= e.lineno <= line_of("clash-branch")
    assert "y" in str(e)


def test_scalar_becoming_an_array_in_a_loop():
    @adjit.jit
    def f(x, n):
        s = 0.0
        for i in range(n):  # clash-loop
            s = x * 2.0
        return s

    expect_compile_error(lambda: f(X, 2), "clash-loop", "variable 's'", "array")


def test_bitwise_operator_on_floats():
    @adjit.func
    def f(a, b):
        return a & b  # float-and

    expect_compile_error(lambda: f(1.0, 2.0), "float-and", "&", "f64")


def test_storing_an_array_into_an_element():
    @adjit.jit
    def f(x, m):
        m[0] = x  # array-into-element

    expect_compile_error(lambda: f(X, np.zeros(3)), "array-into-element", "array")


def test_wrong_number_of_indices():
    @adjit.kernel
    def k(m):
        i = adjit.index()
        m[i] = 1.0  # one-index

    expect_compile_error(lambda: k(np.zeros((2, 2)), ndrange=2), "one-index", "2-D", "1 ind")


def test_different_return_types():
    @adjit.jit
    def f(x, c):
        if c > 0:
            return x
        return 1.0  # two-returns

    with pytest.raises(adjit.CompilationError) as info:
        f(X, 1)
    assert info.value.filename == __file__


def test_kernel_returning_a_value():
    @adjit.kernel
    def k(x):
        return x[0]  # kernel-return

    expect_compile_error(lambda: k(X, ndrange=1), "kernel-return", "kernels return nothing")


def test_unpacking_the_wrong_number_of_values():
    @adjit.func
    def f(a):
        p, q, r = a, a  # unpack-count
        return p

    expect_compile_error(lambda: f(1), "unpack-count", "2", "3")


# ---- what belongs where ----------------------------------------------------------------

def test_array_creation_inside_a_kernel():
    # A kernel makes local arrays of constant shapes only (test_kernel_local_arrays.py): one
    # shaped like an argument is refused.
    @adjit.kernel
    def k(x):
        tmp = adjit.zeros_like(x)  # kernel-alloc
        x[0] = tmp[0]

    expect_compile_error(lambda: k(X, ndrange=1), "kernel-alloc", "zeros_like", "@adjit.jit")


def test_index_outside_a_kernel():
    @adjit.jit
    def f(x):
        return x[adjit.index()]  # index-in-jit

    expect_compile_error(lambda: f(X), "index-in-jit", "adjit.index", "kernel")


@adjit.jit
def some_jit_function(v):
    return v


def test_kernel_calling_a_jit_function():
    @adjit.kernel
    def k(x):
        i = adjit.index()
        x[i] = some_jit_function(x[i])  # kernel-calls-jit

    expect_compile_error(lambda: k(X, ndrange=4), "kernel-calls-jit", "some_jit_function")


@adjit.func
def recursive(n):
    if n <= 0:
        return 0
    return n + recursive(n - 1)  # recursion


def test_recursion():
    expect_compile_error(lambda: recursive(3), "recursion", "recursion")


@adjit.kernel
def broken_kernel(x):
    i = adjit.index()
    x[i] = undefined_thing  # broken-kernel  # noqa: F821


def test_error_in_a_kernel_launched_from_a_jit_function_names_the_kernel_line():
    @adjit.jit
    def f(x):
        broken_kernel(x, ndrange=len(x))  # launch-of-broken

    e = expect_compile_error(lambda: f(X), "broken-kernel", "undefined_thing")
    assert [site[1] for site in e.call_sites] == [line_of("launch-of-broken")]


@adjit.func
def broken_leaf(x):
    return x + not_defined_anywhere  # broken-leaf  # noqa: F821


@adjit.func
def middle(x):
    return 2.0 * broken_leaf(x)  # calls-leaf


def test_error_in_a_callee_names_each_call_site_on_the_way():
    # The error is where the callee is wrong; the message then lists the calls that led
    # there, innermost first, each with its line and a caret, as a traceback would.
    @adjit.jit
    def top(x):
        s = 0.0
        for i in range(len(x)):
            s += middle(x[i])  # calls-middle
        return s

    e = expect_compile_error(lambda: top(X), "broken-leaf", "not_defined_anywhere")
    sites = [line_of("calls-leaf"), line_of("calls-middle")]
    assert [(f, line) for f, line, *_ in e.call_sites] == [(__file__, n) for n in sites]
    text = str(e)
    assert text.index(f"called from {__file__}:{sites[0]}:") < \
        text.index(f"called from {__file__}:{sites[1]}:")
    assert "s += middle(x[i])" in text and "^" in text.splitlines()[-1]
    import pickle
    again = pickle.loads(pickle.dumps(e))
    assert again.call_sites == e.call_sites and str(again) == text


def test_error_inside_the_function_itself_names_no_call_site():
    @adjit.jit
    def own(x):
        return x + nowhere_defined  # own-error  # noqa: F821

    e = expect_compile_error(lambda: own(1.0), "own-error", "nowhere_defined")
    assert e.call_sites == [] and "called from" not in str(e)


# ---- launches ----------------------------------------------------------------------------

@adjit.kernel
def fill(x, v):
    i = adjit.index()
    x[i] = v


def test_launch_without_ndrange_from_python():
    with pytest.raises(TypeError, match="ndrange"):
        fill(np.zeros(3), 1.0)


def test_launch_without_ndrange_inside_jit():
    @adjit.jit
    def f(x):
        fill(x, 1.0)  # launch-no-ndrange

    expect_compile_error(lambda: f(X), "launch-no-ndrange", "ndrange")


@pytest.mark.parametrize("ndrange, error", [(-1, ValueError), (2.5, TypeError),
                                            ((), ValueError), ("4", TypeError),
                                            (True, TypeError)])
def test_bad_ndrange(ndrange, error):
    with pytest.raises(error, match="ndrange"):
        fill(np.zeros(3), 1.0, ndrange=ndrange)


def test_launch_with_the_wrong_number_of_arguments():
    with pytest.raises(TypeError, match="fill"):
        fill(np.zeros(3), ndrange=3)


def test_kernel_ndrange_rank_against_index_nd():
    @adjit.kernel
    def k(x):
        i, j = adjit.index_nd()  # nd-rank
        x[i] = j

    expect_compile_error(lambda: k(np.zeros(3), ndrange=3), "nd-rank", "unpack")


# ---- arguments from Python -----------------------------------------------------------------

@adjit.jit
def takes_anything(x):
    return x


# (a list or tuple is a pytree: its leaves are named by their paths, `x[1]`)
@pytest.mark.parametrize("value", ["text", [1.0, "text"], (1, None), None, 1 + 2j,
                                   np.zeros(3, dtype=np.float16), np.zeros(2, dtype=np.complex128),
                                   np.zeros(2, dtype=np.uint8), object()])
def test_argument_of_a_type_adjit_does_not_take(value):
    with pytest.raises(TypeError, match=r"argument 'x(\[1\])?'"):
        takes_anything(value)


@adjit.jit
def annotated_matrix(m: adjit.Array[adjit.f64, 2]):
    return m


def test_array_of_the_wrong_rank_against_an_annotation():
    with pytest.raises(TypeError, match=r"argument 'm'.*ndim 1"):
        annotated_matrix(np.zeros(3))
    with pytest.raises(TypeError, match="argument 'm'"):
        annotated_matrix(np.zeros((2, 2), dtype=np.float32))
    with pytest.raises(TypeError, match="argument 'm'"):
        annotated_matrix(2.0)
    assert annotated_matrix(np.eye(2)).shape == (2, 2)


@adjit.jit
def annotated_scalar(a: adjit.f32):
    return a


def test_array_given_for_a_scalar_annotation():
    with pytest.raises(TypeError, match="argument 'a'"):
        annotated_scalar(np.zeros(3))


def test_non_contiguous_views_are_taken_without_a_copy():
    for make in (lambda m: m[:, 1], lambda m: m.T, lambda m: m[::2], lambda m: m[::-1, ::3]):
        m = np.arange(12.0).reshape(3, 4)
        view = make(m)
        out = takes_anything(view)
        np.testing.assert_array_equal(out, view)
        assert out.flags.c_contiguous       # (a returned view is a new array)
        fill(view.reshape(-1) if view.ndim == 1 else view[0], 7.0, ndrange=1)
        expect = np.arange(12.0).reshape(3, 4)
        (make(expect).reshape(-1) if view.ndim == 1 else make(expect)[0])[0] = 7.0
        np.testing.assert_array_equal(m, expect)    # written through the view


def test_strides_that_are_not_whole_elements_are_refused():
    raw = np.zeros(10, dtype=np.uint8)
    odd = np.ndarray((2,), np.float64, raw.data, offset=0, strides=(1,))
    with pytest.raises(ValueError, match="not whole elements"):
        takes_anything(odd)


def test_wrong_number_of_arguments():
    with pytest.raises(TypeError, match="takes_anything"):
        takes_anything(1, 2)


def test_bad_annotation_is_refused_when_decorating():
    with pytest.raises(TypeError, match="annotation"):
        @adjit.jit
        def f(x: set):     # (tuple, list, dict and NamedTuples are pytrees: taken)
            return x


def test_compilation_error_keeps_the_source_line():
    @adjit.func
    def f(a):
        return a + nowhere  # caret  # noqa: F821

    e = expect_compile_error(lambda: f(1.0), "caret")
    assert "return a + nowhere" in str(e)
    assert "^" in str(e)


def test_integer_constant_that_does_not_fit_the_type():
    @adjit.func
    def f(a):
        return a + 2**40  # overflow-constant

    expect_compile_error(lambda: f(np.int32(1)), "overflow-constant", "does not fit", "i32")
    assert f(1) == 1 + 2**40    # fits in i64


def test_truth_value_of_an_array():
    @adjit.jit
    def f(x):
        if x:  # array-truth
            return 1
        return 0

    expect_compile_error(lambda: f(X), "array-truth", "ambiguous")


def test_float_range_bound():
    @adjit.func
    def f(a):
        s = 0
        for i in range(a):  # float-range
            s += i
        return s

    expect_compile_error(lambda: f(2.0), "float-range", "range", "integer")


def test_integer_to_a_negative_power_raises_value_error():
    @adjit.func
    def f(a, b):
        return a ** b

    with pytest.raises(ValueError, match="negative"):
        f(2, -1)
    assert f(2, 10) == 1024


@adjit.jit
def _add_arrays(x, y):
    return x + y


def test_shape_mismatch_names_the_line():
    with pytest.raises(ValueError, match=r"different shapes \(at .*test_errors.py:\d+\)"):
        _add_arrays(np.ones(3), np.ones(4))


@adjit.jit
def _twice_int(n: int):
    return n * 2


@adjit.jit
def _twice_any(n):
    return n * 2


def test_int_argument_out_of_range_is_named():
    with pytest.raises(OverflowError, match="argument 'n'"):
        _twice_int(2 ** 70)
    with pytest.raises(OverflowError, match="argument 'n'.*int64"):
        _twice_any(2 ** 70)


# ---- functions adjit cannot read or compile from their source (issue 8.12) ----------------

def test_async_def_is_refused_at_its_line():
    with pytest.raises(adjit.CompilationError) as info:
        @adjit.kernel
        async def bad(x):  # async-def
            pass
    e = info.value
    assert (e.filename, e.lineno) == (__file__, line_of("async-def"))
    assert "bad is an async def" in str(e) and "plain def" in str(e)
    assert "async def bad(x):" in str(e) and "<unknown>" not in str(e)


def test_function_defined_by_exec_says_why_and_what_to_do():
    namespace = {"adjit": adjit}
    with pytest.raises(adjit.CompilationError) as info:
        exec("x = 1\n\n@adjit.jit\ndef f(v):\n    return v\n", namespace)
    e = info.value
    assert (e.filename, e.lineno) == ("<string>", 3)     # where Python says f was defined
    text = str(e)
    assert text.startswith("<string>:3:")
    assert "cannot read the source of f" in text
    assert "exec()" in text and "python -c" in text      # why
    assert ".py file" in text                            # what to do


def test_function_defined_by_python_dash_c(tmp_path):
    import subprocess
    import sys
    code = "import adjit\n@adjit.jit\ndef f(v):\n    return v\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode != 0
    assert "CompilationError: <string>:2:1: cannot read the source of f: f was defined in " \
           "<string>" in done.stderr
    assert "python -c" in done.stderr and ".py file" in done.stderr


def test_function_whose_file_is_gone(tmp_path):
    path = tmp_path / "gone.py"
    path.write_text("def f(v):\n    return v\n")
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    path.unlink()
    import linecache
    linecache.clearcache()
    with pytest.raises(adjit.CompilationError) as info:
        adjit.jit(namespace["f"])
    e = info.value
    assert (e.filename, e.lineno) == (str(path), 1)
    assert f"its file {path} cannot be read" in str(e)


def test_non_functions_are_refused():
    # (a lambda whose source Python has compiles: tests/api/test_trust_plain_functions.py)
    assert adjit.jit(lambda v: v)(2.5) == 2.5
    with pytest.raises(adjit.CompilationError, match="this is a ufunc"):
        adjit.jit(np.sin)


def test_star_parameters_are_refused_at_the_parameter():
    with pytest.raises(adjit.CompilationError) as info:
        @adjit.jit
        def f(x, *rest):  # star-param
            return x
    e = info.value
    assert (e.filename, e.lineno) == (__file__, line_of("star-param"))
    assert "parameter 'rest'" in str(e) and "positional" in str(e)


def test_caret_column_of_a_nested_function_counts_its_indentation():
    # Functions defined inside a test are parsed dedented; the column the error names (and
    # the caret under the source line) must still be the column in this file.
    @adjit.jit
    def f(x):
        s = 0.0
        s += sum([v for v in range(3)])  # nested-col
        return s

    e = expect_compile_error(lambda: f(X), "nested-col", "ListComp")
    with open(__file__) as src:
        text = src.read().splitlines()[e.lineno - 1]
    assert e.col == text.index("[v for v"), (e.col, text)
    assert f":{e.lineno}:{e.col + 1}:" in str(e)
    caret_line = str(e).splitlines()[-1]
    assert caret_line.index("^") - 4 == e.col


def test_pass_errors_in_a_nested_kernel_name_the_column_in_the_file():
    # Errors the autodiff pass raises come back through the IR's locations, which the
    # code generator made from the dedented tree.
    @adjit.kernel
    def item_bound(a, out):
        i = adjit.index()
        acc = 0.0
        while a[i] < 9.0:  # nested-loc
            a[i] = adjit.sin(acc + a[i]) + 1.5
        out[i] = acc

    with pytest.raises(adjit.CompilationError) as info:
        adjit.autodiff(adjit.Reverse, item_bound, adjit.Duplicated(np.ones(8), np.zeros(8)),
                       adjit.Duplicated(np.zeros(8), np.ones(8)), ndrange=8)
    e = info.value
    assert e.lineno == line_of("nested-loc"), str(e)
    with open(__file__) as src:
        text = src.read().splitlines()[e.lineno - 1]
    assert e.col >= text.index("a[i] < 9.0"), (e.col, text)


def test_compilation_errors_pickle_with_their_fields():
    # Raised in a worker process (multiprocessing, a process pool), an error arrives whole.
    import pickle
    from adjit.core.errors import CompilationError, InternalCompilerError
    e = CompilationError("unsupported thing", "/x/model.py", 12, 4, "    y = thing(x)\n")
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is CompilationError and str(again) == str(e)
    assert (again.message, again.filename, again.lineno, again.col, again.source_line) == \
        (e.message, e.filename, e.lineno, e.col, e.source_line)

    class Unpicklable(Exception):
        def __reduce__(self):
            raise TypeError("no")

    for cause in (KeyError("k"), Unpicklable("deep")):
        ice = InternalCompilerError(cause, "/x/model.py", 3, 0, "z = 1")
        back = pickle.loads(pickle.dumps(ice))
        assert type(back) is InternalCompilerError and (back.filename, back.lineno) == \
            ("/x/model.py", 3)
        assert type(cause).__name__ in str(back) and str(back) == str(ice)
