"""
Training a small MLP
====================

A two-layer perceptron (2 -> 32 -> 1, tanh) learns ``sin(3 x0) * cos(2 x1)`` from 256
samples by full-batch gradient descent. The loss is an ``@adjit.jit`` function written with
NumPy's names (``x @ w``, ``np.tanh``, ``np.mean``); ``adjit.value_and_grad`` gives its
value and the gradients of all four parameter arrays in one reverse pass. Training is then
repeated as one compiled loop, with no Python between the steps: the same training, to
float32 rounding.
"""
import matplotlib.pyplot as plt
import numpy as np

import adjit


@adjit.jit
def loss(w1, b1, w2, b2, x, y):
    h = np.tanh(x @ w1 + b1)
    return np.mean((h @ w2 + b2 - y) ** 2)


@adjit.jit
def train(w1, b1, w2, b2, x, y, lr: float, steps: int):
    for _ in range(steps):
        value, g = adjit.value_and_grad(loss, (0, 1, 2, 3))(w1, b1, w2, b2, x, y)
        w1 = w1 - lr * g[0]
        b1 = b1 - lr * g[1]
        w2 = w2 - lr * g[2]
        b2 = b2 - lr * g[3]
    return w1, b1, w2, b2


rng = np.random.default_rng(0)
x = rng.uniform(-1, 1, (256, 2)).astype(np.float32)
y = (np.sin(3 * x[:, :1]) * np.cos(2 * x[:, 1:])).astype(np.float32)
start = (rng.standard_normal((2, 32)).astype(np.float32),
         np.zeros(32, np.float32),
         (rng.standard_normal((32, 1)) / np.sqrt(32)).astype(np.float32),
         np.zeros(1, np.float32))

# %%
# A gradient against central differences
# --------------------------------------
# In float64, one weight's derivative.

p64 = [p.astype(np.float64) for p in start]
x64, y64 = x.astype(np.float64), y.astype(np.float64)
_, g = adjit.value_and_grad(loss, (0, 1, 2, 3))(*p64, x64, y64)
e = np.zeros_like(p64[2])
e[5, 0] = 1e-6
fd = (loss(p64[0], p64[1], p64[2] + e, p64[3], x64, y64)
      - loss(p64[0], p64[1], p64[2] - e, p64[3], x64, y64)) / 2e-6
print(f"d loss / d w2[5, 0]: adjit {g[2][5, 0]:.9f}, central difference {fd:.9f}")
assert abs(g[2][5, 0] - fd) < 1e-7

# %%
# Training, one step per call
# ---------------------------

lr, steps = 0.1, 500
params, losses = list(start), []
for _ in range(steps):
    value, g = adjit.value_and_grad(loss, (0, 1, 2, 3))(*params, x, y)
    losses.append(value)
    params = [p - lr * d for p, d in zip(params, g)]
print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} after {steps} steps")
assert losses[-1] < 0.2 * losses[0]
assert params[0].dtype == np.float32      # a Python learning rate keeps float32 weights

# %%
# The same training as one compiled call
# --------------------------------------

trained = train(*start, x, y, lr, steps)
# (float32 sums in another order, over 500 steps: close weights, not equal bits)
for a, b in zip(trained, params):
    np.testing.assert_allclose(a, b, atol=2e-2)
final = loss(*trained, x, y)
print(f"one compiled loop: loss {final:.4f}")
assert abs(final - loss(*params, x, y)) < 1e-3

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
ax1.semilogy(losses)
ax1.set_xlabel("step")
ax1.set_ylabel("mean squared error")
ax1.set_title("loss curve")
grid = np.stack(np.meshgrid(np.linspace(-1, 1, 60), np.linspace(-1, 1, 60)), -1)
grid = grid.reshape(-1, 2).astype(np.float32)
w1, b1, w2, b2 = trained
prediction = np.tanh(grid @ w1 + b1) @ w2 + b2
im = ax2.imshow(prediction.reshape(60, 60), extent=(-1, 1, -1, 1), origin="lower",
                cmap="coolwarm")
ax2.scatter(x[:, 0], x[:, 1], c=y[:, 0], cmap="coolwarm", s=8, edgecolors="k",
            linewidths=0.3)
ax2.set_title("the trained network (samples as dots)")
fig.colorbar(im, ax=ax2)
fig.tight_layout()
plt.show()
