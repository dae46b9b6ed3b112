"""The profiler (`adjit.profile()`, runtime/profiling.py) and ADJIT_LOG=compile: compiles with
their phases and disk-cache hits or misses, launches, calls and derivative phases recorded,
the table and the Chrome trace, the native dispatcher back once no profile is open."""
import json
import logging
import threading

import numpy as np
import pytest

import adjit
from adjit import Array, Duplicated, f64
from adjit.runtime import native_dispatch, profiling


@adjit.kernel
def step(x: Array[f64, 1], y: Array[f64, 1]):
    i = adjit.index()
    y[i] = x[i] + 0.1 * adjit.sin(x[i])


@adjit.jit
def energy(x):
    return adjit.sum(x * x)


@adjit.jit
def tripled(x):
    return x * 3.0


@adjit.jit
def relaxed(x, steps: int):
    s = x
    for _ in adjit.checkpointed(range(steps), snapshots=2):
        s = 0.9 * s + 0.1 * adjit.sin(s)
    return s


N, STEPS = 8, 50


def _simulate_and_differentiate(x0):
    """50 launches forward, each state kept; then each launch's reverse derivative, last
    first (the tape of launches kept by hand): the gradient of sum(x_50) at x0."""
    xs = [x0]
    for _ in range(STEPS):
        y = np.empty(N)
        step(xs[-1], y, ndrange=N)
        xs.append(y)
    g = np.ones(N)
    for k in reversed(range(STEPS)):
        dx = np.zeros(N)
        adjit.autodiff(adjit.Reverse, step, Duplicated(xs[k], dx), Duplicated(xs[k + 1], g),
                       ndrange=N)
        g = dx
    return g


def _numpy_loss(x):
    for _ in range(STEPS):
        x = x + 0.1 * np.sin(x)
    return x.sum()


def test_a_profile_of_a_gradient_through_50_launches(tmp_path):
    x0 = np.linspace(0.0, 1.0, N)
    # (forgotten in memory: the profile sees them found again, in the disk cache or compiled)
    step._cache = {}
    step.__dict__.pop("_derivatives", None)
    with adjit.profile() as p:
        g = _simulate_and_differentiate(x0)
    e = np.eye(N)[3] * 1e-6
    assert g.dtype == np.float64
    assert g[3] == pytest.approx((_numpy_loss(x0 + e) - _numpy_loss(x0 - e)) / 2e-6, rel=1e-6)

    rows = {(r["name"], r["kind"]): r for r in p.rows()}
    assert rows[("step", "launch")]["count"] == STEPS
    reverse = ("step: reverse mode (augmented forward and reverse sweep, one call)",
               "derivative")
    assert rows[reverse]["count"] == STEPS
    compiles = [e for e in p.events if e.kind == "compile"]
    assert len(compiles) == 2 and all(e.args["disk_cache"] in ("hit", "miss")
                                      for e in compiles)
    assert {e.name.split(" for ")[0] for e in compiles} == {"step (call)",
                                                            "step (Reverse(dup,dup))"}
    totals = [r["total"] for r in p.rows()]
    assert totals == sorted(totals, reverse=True)

    text = p.table()
    assert repr(text) == text                   # (shown as the table at a prompt)
    header, *lines = text.splitlines()
    assert header.split() == ["name", "kind", "count", "total", "ms", "self", "ms", "mean",
                              "ms", "%"]
    assert any(line.startswith("step ") and " launch " in line and f" {STEPS} " in line
               for line in lines)
    assert "wall time" in lines[-1]

    path = tmp_path / "trace.json"
    p.save(path)
    trace = json.loads(path.read_text())["traceEvents"]
    complete = [e for e in trace if e["ph"] == "X"]
    assert len(complete) == len(p.events)
    for e in complete:
        assert {"name", "cat", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert e["ts"] >= 0 and e["dur"] >= 0
    launches = [e for e in complete if e["cat"] == "launch"]
    assert len(launches) == STEPS and {e["name"] for e in launches} == {"step"}
    assert all(e["args"]["ndrange"] == [N] and e["args"]["device"] == "cpu"
               and e["args"]["work_items"] == N and e["args"]["threads"] >= 1
               for e in launches)
    assert [e["ts"] for e in launches] == sorted(e["ts"] for e in launches)
    assert sum(e["cat"] == "derivative" for e in complete) == STEPS
    # Nesting by time on one thread: the launch's compile inside the first launch (the
    # derivative's is found before its call runs, outside it), each compile phase inside a
    # compile, the derivative calls inside no launch.
    by_kind = {}
    for e in complete:
        by_kind.setdefault(e["cat"], []).append(e)

    def inside(e, outer):
        return any(o["tid"] == e["tid"] and o["ts"] <= e["ts"]
                   and e["ts"] + e["dur"] <= o["ts"] + o["dur"] + 1e-3 for o in outer)
    launch_compile = next(c for c in by_kind["compile"] if c["name"].startswith("step (call)"))
    assert inside(launch_compile, launches[:1]) and not inside(launch_compile, launches[1:])
    assert by_kind["compile phase"] and all(inside(ph, by_kind["compile"])
                                            for ph in by_kind["compile phase"])
    assert not any(inside(d, launches) for d in by_kind["derivative"])


def test_the_native_dispatcher_is_back_once_no_profile_is_open():
    x, y = np.arange(4.0), np.zeros(4)
    step(x, y, ndrange=4)
    energy(x)                                # (compiled before)
    assert type(step).__call__ is native_dispatch.kernel_call
    assert type(energy).__call__ is native_dispatch.function_call
    with adjit.profile() as outer:
        step(x, y, ndrange=4)
        with adjit.profile() as inner:
            energy(x)
        assert type(step).__call__ is not native_dispatch.kernel_call
        # a call from another thread is recorded too, under its own thread id
        worker = threading.Thread(target=energy, args=(x,))
        worker.start()
        worker.join()
    assert type(step).__call__ is native_dispatch.kernel_call
    assert type(energy).__call__ is native_dispatch.function_call
    assert profiling.ACTIVE is None
    step(x, y, ndrange=4)                    # recorded by neither
    energy(x)
    assert [(e.name, e.kind) for e in inner.events] == [("energy", "call")]
    assert [(e.name, e.kind) for e in outer.events] == [("step", "launch"),
                                                         ("energy", "call"),
                                                         ("energy", "call")]
    assert outer.events[1] is inner.events[0]
    assert outer.events[2].tid == worker.ident != outer.events[1].tid
    assert outer.events[1].args["result_bytes"] == 8    # (a float64 scalar)
    assert y[1] == pytest.approx(1.0 + 0.1 * np.sin(1.0))


def test_split_reverse_and_forward_mode_phases():
    x = np.array([1.0, 2.0, 3.0])
    with adjit.profile() as p:
        value, pullback = adjit.vjp(energy, x)
        (g1,) = pullback(1.0)
        (g2,) = pullback(2.0)           # (one augmented forward: its tape serves both)
        primal, tangent = adjit.jvp(energy, (x,), (np.ones(3),))
    np.testing.assert_allclose(g1, 2 * x)
    np.testing.assert_allclose(g2, 4 * x)
    assert value == primal == 14.0 and tangent == 12.0
    derivative = [e for e in p.events if e.kind == "derivative"]
    names = [e.name for e in derivative]
    assert names == ["energy: augmented forward", "energy: reverse sweep",
                     "energy: reverse sweep",
                     "energy: forward mode (primal and tangents, one call)"]
    assert derivative[0].args["tape_bytes"] > 0
    assert "tapes: 1," in p.table()


def test_adjit_log_compile_logs_each_compile_and_its_phases(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("ADJIT_LOG", "compile")
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))   # (a miss)
    monkeypatch.setenv("ADJIT_DISK_CACHE", "1")          # (off in the suite: conftest.py)
    caplog.set_level(logging.INFO, logger="adjit.compile")
    tripled._cache = {}
    x = np.arange(3.0)
    with adjit.profile() as p:
        np.testing.assert_array_equal(tripled(x), 3 * x)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "adjit.compile"]
    assert line.startswith("tripled (call) for [") and ": compiled in " in line
    for part in ("frontend", "MLIR passes", "LLVM", "disk cache: miss"):
        assert part in line, line
    (compile_event,) = [e for e in p.events if e.kind == "compile"]
    assert compile_event.args["disk_cache"] == "miss"
    phases = {e.name for e in p.events if e.kind == "compile phase"}
    assert {"frontend", "MLIR passes", "LLVM"} <= phases
    # The next process (here: the memo forgotten) finds it in the disk cache.
    adjit.wait_for_builds()
    tripled._cache = {}
    caplog.clear()
    np.testing.assert_array_equal(tripled(x), 3 * x)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "adjit.compile"]
    assert line.startswith("tripled (call) for [") and ": loaded from the disk cache in " in line
    assert "disk cache: hit" in line


def test_a_bad_adjit_log_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv("ADJIT_LOG", "compile,trace")
    energy._cache = {}           # (a call that asks the compile service)
    with pytest.raises(ValueError, match=r"ADJIT_LOG must be a comma-separated list of "
                                         r"categories \(known: compile\), got 'compile,trace' "
                                         r"\(unknown category 'trace'\)"):
        energy(np.ones(2))
    monkeypatch.setenv("ADJIT_LOG", " compile , ")
    assert profiling.log_categories() == {"compile"}


def test_a_checkpointed_loop_s_recomputation_is_counted_per_derivative_call():
    before = adjit.memory_stats()["checkpoint_steps_recomputed"]
    with adjit.profile() as p:
        g = adjit.grad(relaxed)(0.5, 20)
    recomputed = adjit.memory_stats()["checkpoint_steps_recomputed"] - before
    s, ds = 0.5, 1.0                       # the derivative, step by step
    for _ in range(20):
        s, ds = 0.9 * s + 0.1 * np.sin(s), ds * (0.9 + 0.1 * np.cos(s))
    assert g == pytest.approx(ds, rel=1e-12)
    (call,) = [e for e in p.events if e.kind == "derivative"]
    assert recomputed > 0 and call.args["checkpoint_steps_recomputed"] == recomputed
    assert p.table().splitlines()[-1].endswith(f"checkpointed steps recomputed: {recomputed}")
