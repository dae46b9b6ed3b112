"""Fixtures for the frontend tests."""
from __future__ import annotations

import pytest


@pytest.fixture
def debug_mode(monkeypatch):
    """ADJIT_DEBUG=1 for one test (adjit reads it at call time)."""
    monkeypatch.setenv("ADJIT_DEBUG", "1")


@pytest.fixture(autouse=True)
def _no_leaked_settings(monkeypatch):
    # Tests must not depend on the developer's environment.
    for var in ("ADJIT_DEBUG", "ADJIT_DUMP_IR"):
        monkeypatch.delenv(var, raising=False)
