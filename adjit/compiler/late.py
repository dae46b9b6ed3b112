"""Late-bound makers: a module that needs, at compile time, something made by modules
that import its own importers (matmul.py needs the device function with the products'
derivative rules, made with functions.py and rules.py, which import the code generator
that imports matmul.py) finds its maker here, registered by a module the API imports
(matmul_rules.py). No MLIR, no adjit imports: importing it costs nothing."""
from __future__ import annotations

from typing import Callable

MAKERS: dict[str, Callable[[], object]] = {}
