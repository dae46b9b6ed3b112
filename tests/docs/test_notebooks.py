"""Functions defined where Python keeps no file (issue 32, item 4).

- docs/notebooks/first-steps.ipynb (a kernel, a @jit function, gradients, a lambda, defined
  in cells) is executed in a Jupyter kernel by nbclient, and its outputs are checked:
  IPython keeps each cell's source in linecache, which adjit's source reader
  (adjit/lang/source.py, through inspect) reads.
- Python 3.13's REPL keeps each input too (its `_pyrepl` registers the text in linecache
  under `<python-input-N>`, with no modification time, before running it): the same entry,
  made here by hand, compiles on any Python.
- A function made by exec() with no source registered is refused, naming the way out.
"""
from __future__ import annotations

import json
import linecache
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

import adjit
from adjit.core.errors import CompilationError

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "notebooks" / "first-steps.ipynb"


def this_python_kernel(folder: Path) -> KernelManager:
    """A kernel manager whose kernel is this interpreter's ipykernel (whatever kernelspecs
    the user's Jupyter folders hold), so that the notebook runs this adjit."""
    spec = folder / "kernels" / "adjit-tests"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "adjit tests", "language": "python"}))
    specs = KernelSpecManager(kernel_dirs=[str(folder / "kernels")])
    return KernelManager(kernel_name="adjit-tests", kernel_spec_manager=specs)


def text_outputs(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_the_first_steps_notebook_runs_in_a_jupyter_kernel(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    km = this_python_kernel(tmp_path)
    assert km.format_kernel_cmd()[0] == sys.executable
    # (a cell that raises fails the test here, with the cell and its traceback)
    NotebookClient(nb, km=km, timeout=600,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    printed = [text_outputs(c) for c in code]
    saxpy = np.array(printed[2].replace("[", " ").replace("]", " ").split(), float)
    np.testing.assert_allclose(saxpy, 2.0 * np.linspace(0.0, 1.0, 8) + 1.0)
    value, numpy_value = map(float, printed[3].split())
    assert value == pytest.approx(numpy_value, rel=1e-12)
    assert printed[4].startswith("d energy / d a: ")
    dx = np.array(printed[5].replace("[", " ").replace("]", " ").split(), float)
    np.testing.assert_array_equal(dx, np.full(8, 2.0))
    assert float(printed[6]) == 12.0
    assert not any(o.output_type == "error" for c in code for o in c.outputs)


SOURCE = '''\
@adjit.jit
def cube_sum(x):
    return np.sum(x * x * x)
'''


def test_a_function_typed_at_python_3_13_s_prompt_compiles():
    # What Python 3.13's REPL (Lib/_pyrepl/simple_interact.py) does with an input before
    # running it: linecache._register_code(name, text, "<stdin>"), which stores the
    # entry below (no modification time: linecache.checkcache keeps it).
    name = "<python-input-7>"
    linecache.cache[name] = (len(SOURCE), None, SOURCE.splitlines(True), "<stdin>")
    try:
        scope = {"adjit": adjit, "np": np}
        exec(compile(SOURCE, name, "exec"), scope)
        x = np.array([1.0, 2.0, -0.5])
        assert scope["cube_sum"](x) == pytest.approx(np.sum(x ** 3))
        np.testing.assert_allclose(adjit.grad(scope["cube_sum"])(x), 3 * x * x)
    finally:
        del linecache.cache[name]
    # a lambda is found in its input's text as in a file's
    name, text = "<python-input-8>", "g = adjit.grad(lambda t: t * t * t)(2.0)\n"
    linecache.cache[name] = (len(text), None, [text], "<stdin>")
    try:
        exec(compile(text, name, "exec"), scope)
        assert scope["g"] == pytest.approx(12.0)
    finally:
        del linecache.cache[name]


def test_a_function_made_by_exec_is_refused_with_the_way_out():
    scope = {"adjit": adjit, "np": np}
    with pytest.raises(CompilationError) as e:
        exec(compile(SOURCE, "<string>", "exec"), scope)
    message = str(e.value)
    assert message.startswith("<string>:1:")      # (the def, from its decorator)
    assert "cannot read the source of cube_sum" in message
    assert "define it in a .py file" in message
