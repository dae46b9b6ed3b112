"""Warnings shown at the user's line: a warning's source is the first frame outside adjit
(and outside importlib, for one raised while `import adjit` runs), so Python prints the
user's call or import, never a line of adjit's own code. (Python 3.12's
`warnings.warn(skip_file_prefixes=...)` does this; 3.11 needs the frames counted.)"""
from __future__ import annotations

import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _importlib(filename: str) -> bool:
    return filename.startswith("<frozen importlib")


def warn(message: str, category: type[Warning]) -> None:
    """`warnings.warn(message, category)` attributed to the first frame outside adjit.

    Example:
        ::

            import warnings
            from adjit.core.user_warnings import warn

            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                warn("the cache is off", UserWarning)
            print(caught[0].filename == __file__ or caught[0].filename)   # True: this line
    """
    # (warnings.warn itself skips importlib's frames when it counts stacklevel: so do we)
    level, frame = 1, sys._getframe(1)
    while frame is not None and (frame.f_code.co_filename.startswith(_PACKAGE)
                                 or _importlib(frame.f_code.co_filename)):
        level += not _importlib(frame.f_code.co_filename)
        frame = frame.f_back
    warnings.warn(message, category, stacklevel=level + 1 if frame is not None else 2)
