"""core/locations.py reads positions from MLIR locations' text, as MLIR prints them (the one
parser that errors, adjit-opt's diagnostics and the CPU lowering's check messages use)."""
from __future__ import annotations

from mlir import ir

from adjit.core.locations import file_position, split_line, with_line
from adjit.dialects import make_context


def test_the_first_file_location_of_each_kind():
    with make_context():
        f = ir.Location.file("f.py", 12, 5)
        g = ir.Location.file("g.py", 3, 1)
        cases = {
            f: ("f.py", 12, 5),
            ir.Location.callsite(f, [g]): ("f.py", 12, 5),       # the callee: the inner line
            ir.Location.name("x", f): ("f.py", 12, 5),
            ir.Location.name('a"(b', f): ("f.py", 12, 5),        # quotes inside the name
            ir.Location.fused([g, f]): ("g.py", 3, 1),
            ir.Location.name("x"): None,
            ir.Location.unknown(): None,
        }
        for loc, expected in cases.items():
            assert file_position(str(loc)) == expected, str(loc)


def test_escaped_file_names():
    # MLIR prints a backslash doubled and other bytes than printable ASCII in hex (\C3\A9).
    name = '/tmp/jos\u00e9 "q"\\x.py'
    with make_context():
        loc = ir.Location.file(name, 7, 2)
        assert "\\C3\\A9" in str(loc)
        assert file_position(str(loc)) == (name, 7, 2)


def test_a_check_message_and_its_line():
    message = with_line("index out of range (axis 0)", "/a/b.py", 14)
    assert message == "index out of range (axis 0) (at /a/b.py:14)"
    assert split_line(message) == ("index out of range (axis 0)", "/a/b.py", 14)
    assert split_line("index out of range") is None
