"""
Checkpointing: memory against recomputation
===========================================

Reverse mode through a time loop normally keeps every step's state for the backward sweep:
memory grows with the number of steps. Marking the loop ``adjit.checkpointed(range(steps),
snapshots=k)`` keeps at most ``k`` states and runs steps again from them during the reverse
pass, on Revolve's binomial schedule (the fewest recomputed steps for ``k``).

Here a 1-D reaction-diffusion loop of 64 steps on 16384 float64 points (a state is two
arrays, 256 KiB) is differentiated with 2, 4 and 8 snapshots and without checkpointing (each
schedule is compiled on its own: a few seconds each).
For each, the peak of the memory adjit allocated during the reverse pass
(``adjit.memory_stats()["peak_bytes"]``, from ``adjit.reset_peak_memory()``), the steps it
ran again (``checkpoint_steps_recomputed``) and its time are measured. The gradients agree.
The peak counts, besides the ``k`` states kept, the arrays the loop works in and their
adjoints: a few states more than ``k``.
"""
import time

import matplotlib.pyplot as plt
import numpy as np

import adjit


@adjit.kernel
def reaction_diffusion_step(u, v):
    i = adjit.index()
    n = u.shape[0]
    if 0 < i < n - 1:
        c = u[i]
        v[i] = c + 0.2 * (u[i - 1] + u[i + 1] - 2.0 * c) + 0.05 * c * (1.0 - c)
    else:
        v[i] = u[i]


@adjit.jit
def store_all(u0, steps: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        reaction_diffusion_step(u, v, ndrange=u.shape)
        u, v = v, u
    return adjit.sum(u * u)


def checkpointed_loss(k):
    """The same loss with its loop checkpointed with k snapshots (a schedule is a constant
    of the compiled code: here the closure's k)."""
    @adjit.jit
    def loss(u0, steps: int):
        u = u0.copy()
        v = adjit.empty_like(u)
        for _ in adjit.checkpointed(range(steps), snapshots=k):
            reaction_diffusion_step(u, v, ndrange=u.shape)
            u, v = v, u
        return adjit.sum(u * u)
    return loss


def measure(loss, u0, steps):
    """(gradient, peak extra bytes, steps recomputed, best time of 3) of one reverse pass."""
    times = []
    for _ in range(3):
        g = np.zeros_like(u0)
        adjit.release_cached_memory()        # (blocks kept for reuse would hide the peak)
        adjit.reset_peak_memory()
        before = adjit.memory_stats()
        start = time.perf_counter()
        adjit.autodiff(adjit.Reverse, loss, adjit.Duplicated(u0.copy(), g), steps)
        times.append(time.perf_counter() - start)
        after = adjit.memory_stats()
    return (g, after["peak_bytes"] - before["bytes_in_use"],
            after["checkpoint_steps_recomputed"] - before["checkpoint_steps_recomputed"],
            min(times))


steps = 64
u0 = np.random.default_rng(0).random(16384)
state = 2 * u0.nbytes
g_all, peak_all, _, time_all = measure(store_all, u0, steps)
snapshot_counts = [2, 4, 8]
rows = []
for k in snapshot_counts:
    g, peak, recomputed, seconds = measure(checkpointed_loss(k), u0, steps)
    np.testing.assert_allclose(g, g_all, rtol=1e-12, atol=1e-12)
    rows.append((peak, recomputed, seconds))
    print(f"snapshots={k:2d}: peak {peak / 2**20:6.2f} MiB ({peak / state:4.1f} states), "
          f"{recomputed:4d} steps recomputed, {seconds * 1e3:6.1f} ms")
print(f"store all  : peak {peak_all / 2**20:6.2f} MiB ({peak_all / state:4.1f} states), "
      f"   0 steps recomputed, {time_all * 1e3:6.1f} ms")
peaks, recomputed, seconds = (np.array(c) for c in zip(*rows))
# fewer snapshots: less memory, more steps run again
assert np.all(np.diff(peaks) > 0) and np.all(np.diff(recomputed) < 0)
assert peaks[-1] < peak_all / 2

# %%
# The trade-off
# -------------
# Memory in states (256 KiB each) and the steps run again, against the snapshot count; the
# dashed lines are the loop without checkpointing, whose tape keeps the one array each
# step reads (64 x 128 KiB). Times are of the machine that built these pages (the best of
# three runs): recomputation costs steps, and a large tape costs fresh memory.

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
ax1.plot(snapshot_counts, peaks / state, "o-", label="checkpointed")
ax1.axhline(peak_all / state, ls="--", c="gray", label="every step's state kept")
ax1.set_xscale("log", base=2)
ax1.set_xlabel("snapshots")
ax1.set_ylabel("peak memory (states of 256 KiB)")
ax1.legend()
ax2.plot(snapshot_counts, recomputed, "o-", c="C1", label="steps recomputed")
ax2.set_xscale("log", base=2)
ax2.set_xlabel("snapshots")
ax2.set_ylabel("steps recomputed", color="C1")
ax3 = ax2.twinx()
ax3.plot(snapshot_counts, seconds * 1e3, "s:", c="C2", label="time")
ax3.axhline(time_all * 1e3, ls="--", c="gray", label="time, every state kept")
ax3.set_ylim(0, None)
handles = [h for a in (ax2, ax3) for h in a.get_legend_handles_labels()[0]]
ax2.legend(handles, [h.get_label() for h in handles], loc="upper right")
ax3.set_ylabel("reverse pass (ms)", color="C2")
fig.tight_layout()
plt.show()
