"""The autodiff pass's per-op rules: what each op becomes in a forward, augmented and reverse
function. scalar.py is the table of arith and math ops (one linear rule per operand, both
modes); memory_ops.py, call_ops.py, control_flow_ops.py (+ loop_slots.py, checkpoint.py) and
launch_ops.py give the other ops' three rules side by side, merged by lookup.py; custom.py
finds the user's rules that replace a function's derivative. A rule asks its generator for
what it needs through protocols.py's interfaces.
"""
