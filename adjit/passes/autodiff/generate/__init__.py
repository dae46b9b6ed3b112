"""The autodiff pass's engine: the generators that build derivative functions from a primal
one (forward.py; reverse.py with augment.py for split reverse mode; kernel_tape.py for a
kernel's; fixed_point_reverse.py for an adj.fixed_point function), what they keep while
building (context.py, adjoints.py, tape.py, dynamic_tape.py, gather.py), and the transforms
around them (inline_array_calls.py before reverse mode, prune.py after the augmented pass).
The driver (../driver.py) picks the generator; each op's code comes from rules/.
"""
