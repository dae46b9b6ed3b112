"""
Sphere tracing and its image gradient
=====================================

A kernel renders a sphere by sphere tracing: each pixel's ray steps forward by the signed
distance to the sphere (a fixed 40 steps, so every work item runs the same loop), then the
point of closest approach is shaded by the angle between its normal and a light. It computes in float64
(``adjit.vec3d``), so that central differences can check the derivative closely. The silhouette is a soft
step in the ray's closest distance to the surface (about a pixel wide), so that moving the
sphere changes the pixels of its rim smoothly.

``adjit.autodiff`` differentiates the whole rendering (a kernel launch inside an
``@adjit.jit`` function) in forward mode with respect to the sphere's radius: the result's
tangent is an image, d(pixel)/d(radius), bright where growing the sphere brightens a
pixel (its rim), dark where shading moves.
"""
import matplotlib.pyplot as plt
import numpy as np

import adjit
from adjit import vec3d


@adjit.kernel
def trace(image, radius: float, centre_x: float, size: int):
    i, j = adjit.index_nd()
    # a pinhole camera at z = -3 looking along +z; pixel (i, j) is row i, column j
    u = (2.0 * (j + 0.5) / size - 1.0)
    v = (1.0 - 2.0 * (i + 0.5) / size)
    origin = vec3d(0.0, 0.0, -3.0)
    direction = adjit.normalize(vec3d(u, v, 1.6))
    centre = vec3d(centre_x, 0.0, 0.0)
    t = 0.0
    closest = 1.0e9            # the ray's closest approach to the surface, and where
    t_closest = 0.0
    for _ in range(40):
        d = adjit.length(origin + direction * t - centre) - radius
        if d < closest:
            closest = d
            t_closest = t
        t = t + d
    p = origin + direction * t_closest
    normal = adjit.normalize(p - centre)
    light = adjit.normalize(vec3d(-1.0, 1.0, -1.0))
    shade = 0.15 + 0.85 * adjit.max(adjit.dot(normal, light), 0.0)
    # 1 where the ray reaches the surface, falling to 0 over about a pixel beyond it
    coverage = 0.5 - 0.5 * adjit.tanh(40.0 * closest - 2.0)
    image[i, j] = coverage * shade


@adjit.jit
def render(radius: float, centre_x: float, size: int):
    image = adjit.zeros((size, size), adjit.f64)
    trace(image, radius, centre_x, size, ndrange=image.shape)
    return image


size, radius, centre_x = 96, 0.9, 0.2
image = render(radius, centre_x, size)

# %%
# The derivative image, in one forward pass
# -----------------------------------------

# Enzyme's spelling: the radius with its tangent 1.0 (Duplicated), the other arguments
# constant; forward mode returns the result's tangent.
d_radius = adjit.autodiff(adjit.Forward, render, adjit.Duplicated(radius, 1.0),
                          adjit.Const(centre_x), adjit.Const(size))
h = 1e-6
fd = (render(radius + h, centre_x, size) - render(radius - h, centre_x, size)) / (2 * h)
print(f"largest |forward mode - central difference| over the image: {np.abs(d_radius - fd).max():.2e}"
      f" (largest derivative {np.abs(d_radius).max():.1f})")
assert np.allclose(d_radius, fd, rtol=1e-4, atol=1e-4 * np.abs(fd).max())

# %%
# The image and d(image)/d(radius)
# --------------------------------

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 4.2))
ax1.imshow(image, cmap="gray", vmin=0, vmax=1)
ax1.set_title("sphere-traced image")
ax1.set_axis_off()
limit = np.abs(d_radius).max()
im = ax2.imshow(d_radius, cmap="RdBu_r", vmin=-limit, vmax=limit)
ax2.set_title("d image / d radius")
ax2.set_axis_off()
fig.colorbar(im, ax=ax2)
fig.tight_layout()
plt.show()
