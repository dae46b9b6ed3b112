"""Passes over the `adj` dialect: autodiff, and the CPU and GPU lowerings."""
