"""adjit.export / adjit.load (api/export.py, runtime/artifact.py): one file per exported
specialisation, loaded without MLIR or compiling; values bit for bit those of the original
call; wrong arguments, damaged files, other formats, versions and CPUs, and files others can
write are refused with messages naming the problem.

Every artifact is exported once (the module fixture); the tests read copies of it."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

import adjit
from adjit import Array, f64


@adjit.jit
def loss(w: Array[f64, 1], x: Array[f64, 1], s: f64) -> f64:
    return s * np.sum(np.sin(w * x) ** 2)


@adjit.kernel
def saxpy(a: f64, x: Array[f64, 1], y: Array[f64, 1]):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


@adjit.jit
def affine(p, x: Array[f64, 1]):          # p: a dict (a pytree); a tree result
    return {"y": p["a"] * x + p["b"], "total": np.sum(x)}


@adjit.func
def smooth(t: f64) -> f64:
    return t * t * (3.0 - 2.0 * t)


@adjit.jit
def norm32(x: Array[adjit.f32, 1]) -> adjit.f32:
    return np.sqrt(np.sum(x * x) + 1.0)


W = np.linspace(0.0, 1.0, 7)
X = np.linspace(1.0, 2.0, 7)
TREE = {"a": 2.0, "b": np.arange(7.0)}

# name: (what is exported, its example arguments, the arguments of the compared calls)
CASES = {
    "jit": (loss, (W, X, 1.5), (W[::-1].copy(), X, 0.5)),
    "func": (smooth, (0.25,), (0.75,)),
    "grad": (adjit.grad(loss), (W, X, 1.5), (W[::-1].copy(), X, 0.5)),
    "value_and_grad": (adjit.value_and_grad(loss, argnums=(0, 2)), (W, X, 1.5),
                       (W[::-1].copy(), X, 0.5)),
    "hessian": (adjit.hessian(loss), (W, X, 1.5), (W[::-1].copy(), X, 0.5)),
    "tree": (affine, (TREE, X), ({"a": -1.0, "b": np.ones(7)}, X[::-1].copy())),
    "float32": (adjit.value_and_grad(norm32), (X.astype(np.float32),),
                (W.astype(np.float32),)),
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("artifacts")
    os.chmod(folder, 0o700)
    out = {}
    for name, (fn, example, _) in CASES.items():
        out[name] = folder / f"{name}.adjit"
        adjit.export(fn, *example, path=out[name])
    out["kernel"] = folder / "kernel.adjit"
    adjit.export(saxpy, 2.0, X, np.zeros(7), ndrange=7, path=out["kernel"])
    out["cuda_kernel"] = folder / "cuda_kernel.adjit"         # PTX: no GPU needed to export
    adjit.export(saxpy, 2.0, X, np.zeros(7), ndrange=7, device="cuda",
                 path=out["cuda_kernel"])
    return out


def same(a, b) -> bool:
    """Equal bit for bit, through tuples and dicts."""
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_loaded_function_computes_the_original_bit_for_bit(exported, name):
    fn, _, args = CASES[name]
    loaded = adjit.load(exported[name])
    assert same(loaded(*args), fn(*args))
    shown = repr(loaded)
    assert fn.__name__ in shown and ("(t: f64)" if name == "func" else ": Array[f") in shown


def test_sizes_0_and_1(exported):
    """Size 0 is any size; a dimension of size 1 is a specialisation of its own (NumPy
    broadcasts it): refused where the example had another size."""
    w, x = np.zeros(0), np.zeros(0)
    for name in ("jit", "grad", "value_and_grad"):
        fn = CASES[name][0]
        assert same(adjit.load(exported[name])(w, x, 0.5), fn(w, x, 0.5))
    with pytest.raises(TypeError, match=r"the dimensions of size 1 differ \(none exported, "
                                        r"\[0\] given\)"):
        adjit.load(exported["grad"])(np.ones(1), np.ones(1), 0.5)


def test_a_loaded_kernel_takes_its_ndrange_at_each_call(exported):
    k = adjit.load(exported["kernel"])
    assert "saxpy" in repr(k) and "ndrange" in repr(k)
    x = np.linspace(0.0, 1.0, 5)                  # another size than the export's
    y, y_ref = np.ones(5), np.ones(5)
    k(3.0, x, y, ndrange=5)
    saxpy(3.0, x, y_ref, ndrange=5)
    assert same(y, y_ref)
    with pytest.raises(TypeError, match="1-D ndrange"):
        k(3.0, x, y, ndrange=(5, 1))
    with pytest.raises(TypeError, match="needs ndrange="):
        k(3.0, x, y)


@pytest.mark.parametrize("args, message", [
    ((W.astype(np.float32), X, 1.5), "argument 'w' must be .*got an array of dtype float32"),
    ((W[None], X, 1.5), "argument 'w'"),
    ((W, X, "1.5"), "argument 's'"),
])
def test_arguments_of_other_types_are_refused(exported, args, message):
    g = adjit.load(exported["grad"])
    with pytest.raises(TypeError, match=message) as e:
        g(*args)
    assert "export it again" in str(e.value)
    with pytest.raises(TypeError, match=r"takes 3 arguments \(w, x, s\), got 2"):
        g(W, X)


def test_a_tree_of_another_structure_is_refused(exported):
    f = adjit.load(exported["tree"])
    with pytest.raises(TypeError, match="argument 'p' must be a tree of the exported"):
        f({"a": 1.0}, X)


def _rewrite(src: Path, dst: Path, edit_manifest=None, edit_member=None,
             reseal: bool = False) -> Path:
    """A copy of artifact `src` at `dst`, its manifest or a member edited (the manifest's
    checksum recomputed with `reseal`, as someone would who meant to edit it)."""
    with zipfile.ZipFile(src) as z:
        files = {n: z.read(n) for n in z.namelist()}
    manifest = json.loads(files["manifest.json"])
    if edit_manifest:
        edit_manifest(manifest)
    if reseal:
        manifest.pop("checksum")
        manifest["checksum"] = hashlib.sha256(json.dumps(
            manifest, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    files["manifest.json"] = json.dumps(manifest).encode()
    if edit_member:
        files["module.so"] = edit_member(files["module.so"])
    with zipfile.ZipFile(dst, "w") as z:
        for n, data in files.items():
            z.writestr(n, data)
    return dst


def _flip(data: bytes) -> bytes:
    return data[:100] + bytes([data[100] ^ 1]) + data[101:]


@pytest.mark.parametrize("edit, message", [
    (dict(edit_member=_flip), "damaged: the member module.so does not match its checksum"),
    (dict(edit_manifest=lambda m: m["call"].update(entry="other")),
     r"damaged: its manifest.json does not match its checksum"),
    (dict(edit_manifest=lambda m: m.update(format=99)), "artifact format 99; this adjit "
                                                        "reads format 1"),
    (dict(edit_manifest=lambda m: m.update(adjit="0.0.1"), reseal=True),
     "exported by adjit 0.0.1"),
    (dict(edit_manifest=lambda m: m["cpu"]["flags"].append("avx9000"), reseal=True),
     "features this CPU lacks: avx9000"),
    (dict(edit_manifest=lambda m: m["cpu"].update(machine="riscv64"), reseal=True),
     "holds code for riscv64"),
])
def test_damaged_or_foreign_artifacts_are_refused(exported, tmp_path, edit, message):
    bad = _rewrite(exported["grad"], tmp_path / "bad.adjit", **edit)
    with pytest.raises(adjit.ArtifactError, match=message):
        adjit.load(bad)


def test_what_is_not_an_artifact_is_refused(tmp_path):
    (tmp_path / "x.adjit").write_bytes(b"not a zip")
    with pytest.raises(adjit.ArtifactError, match="not an artifact of adjit.export"):
        adjit.load(tmp_path / "x.adjit")
    with pytest.raises(FileNotFoundError, match="no artifact"):
        adjit.load(tmp_path / "none.adjit")
    with pytest.raises(TypeError, match="exports @adjit.jit"):
        adjit.export(lambda x: x, 1.0, path=tmp_path / "y.adjit")
    with pytest.raises(TypeError, match="ndrange= is for kernels; loss is not one"):
        adjit.export(loss, W, X, 1.5, ndrange=7, path=tmp_path / "y.adjit")
    with pytest.raises(TypeError, match="device='cuda'.* got smooth"):
        adjit.export(smooth, 0.5, device="cuda", path=tmp_path / "y.adjit")
    assert not (tmp_path / "y.adjit").exists()


def test_files_others_can_write_are_refused(exported, tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    artifact = private / "g.adjit"
    shutil.copy(exported["grad"], artifact)
    os.chmod(artifact, 0o664)
    with pytest.raises(adjit.ArtifactError, match=f"{artifact} is writable by its group "
                                                  f".*Fix: chmod go-w {artifact}"):
        adjit.load(artifact)
    os.chmod(artifact, 0o644)
    os.chmod(private, 0o777)
    with pytest.raises(adjit.ArtifactError, match=f"{private} is writable by others .*not "
                                                  "sticky.*load only files you trust"):
        adjit.load(artifact)
    os.chmod(private, 0o1777)          # sticky, as /tmp: others cannot replace the file
    assert same(adjit.load(artifact)(W, X, 1.5), adjit.grad(loss)(W, X, 1.5))
    os.chmod(private, 0o700)


CHILD = """
import sys
sys.modules["mlir"] = None            # any import of MLIR now fails
import numpy as np
import adjit
W, X = np.linspace(0.0, 1.0, 7), np.linspace(1.0, 2.0, 7)
paths = dict(arg.split("=", 1) for arg in sys.argv[1:])
out = {}
g = adjit.load(paths["grad"])
out["grad"] = g(W, X, 1.5).tolist()
value, (dw, ds) = adjit.load(paths["value_and_grad"])(W, X, 1.5)
out["value_and_grad"] = [float(value), dw.tolist(), float(ds)]
out["hessian"] = adjit.load(paths["hessian"])(W, X, 1.5).tolist()
y = np.zeros(7)
adjit.load(paths["kernel"])(2.0, X, y, ndrange=7)
out["kernel"] = y.tolist()
out["cuda_kernel"] = repr(adjit.load(paths["cuda_kernel"]))    # loaded; a call needs a GPU
print({"mlir": "mlir.ir" in sys.modules, "out": out})
"""


def test_a_process_without_mlir_runs_exported_gradients(exported, tmp_path):
    cache = tmp_path / "empty-cache"
    cache.mkdir()
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    env = {**os.environ, "ADJIT_CACHE_DIR": str(cache), "ADJIT_DISK_CACHE": "1"}
    result = subprocess.run(
        [sys.executable, str(script), *(f"{k}={v}" for k, v in exported.items())],
        capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    got = eval(result.stdout.strip().splitlines()[-1])
    assert got["mlir"] is False
    assert "saxpy" in got["out"].pop("cuda_kernel")
    value, (dw, ds) = adjit.value_and_grad(loss, argnums=(0, 2))(W, X, 1.5)
    y = np.zeros(7)
    saxpy(2.0, X, y, ndrange=7)
    assert got["out"] == {"grad": adjit.grad(loss)(W, X, 1.5).tolist(),
                          "value_and_grad": [float(value), dw.tolist(), float(ds)],
                          "hessian": adjit.hessian(loss)(W, X, 1.5).tolist(),
                          "kernel": y.tolist()}
    # nothing was compiled or cached there
    assert not [p for p in cache.rglob("*") if p.is_file()]
