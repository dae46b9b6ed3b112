"""The autodiff pass's analyses of a function before and while its derivative is generated:
which values get derivatives (activity_analysis.py), what may be overwritten before the
reverse pass reads it (overwritten.py), whether a primal value is recomputed or taped
(recompute.py), and what every work item of a kernel computes alike (uniform.py,
uniform_loads.py). What each op reads and writes is passes/op_facts.py's.
"""
