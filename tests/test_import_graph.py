"""Layers import downward only (issue 48): no module of shapeloop imports one that imports it back.

The graph is read from the source with ``ast``: every ``import`` and ``from ... import`` of a
shapeloop module, wherever it is written (inside ``if TYPE_CHECKING:`` or a function too, since a
local import hides a circle rather than removing it). ``from shapeloop import x`` is an edge to the
submodule ``x`` where there is one, else to the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import shapeloop

SRC = Path(shapeloop.__file__).resolve().parent.parent


def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name)."""
    found = {}
    for path in sorted((SRC / "shapeloop").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The shapeloop modules ``name`` imports, written anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            edges.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..run import y
                above = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*above, base] if base else above)
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    edges.add(f"{base}.{alias.name}")
                elif base in known:
                    edges.add(base)
    edges.discard(name)
    return edges


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One path around each circle the graph holds, found by a depth-first walk without recursion."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(edges):
        if state.get(start):
            continue
        path = [start]
        pending = [iter(sorted(edges[start]))]
        state[start] = 1
        while pending:
            step = next(pending[-1], None)
            if step is None:
                state[path.pop()] = 2
                pending.pop()
            elif state.get(step) == 1:
                found.append([*path[path.index(step) :], step])
            elif not state.get(step):
                state[step] = 1
                path.append(step)
                pending.append(iter(sorted(edges[step])))
    return found


def test_no_module_imports_one_that_imports_it_back() -> None:
    edges = graph()
    assert {"shapeloop.run", "shapeloop.events", "shapeloop.workspace"} <= set(edges)  # the walk sees them
    assert circles(edges) == [], "\n".join(" -> ".join(circle) for circle in circles(edges))


def test_the_walk_finds_a_circle_through_type_checking_and_local_imports(tmp_path: Path) -> None:
    # the check cannot pass by not looking: a circle written the ways the source could hide one
    package = tmp_path / "shapeloop"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from shapeloop.high import H\n"
    )
    (package / "high.py").write_text("def f():\n    from . import low\n")
    known = {"shapeloop": package / "__init__.py", "shapeloop.low": package / "low.py",
             "shapeloop.high": package / "high.py"}  # fmt: skip
    edges = {name: imports(name, path, known) for name, path in known.items()}
    assert edges == {"shapeloop": set(), "shapeloop.low": {"shapeloop.high"}, "shapeloop.high": {"shapeloop.low"}}
    assert circles(edges) == [["shapeloop.high", "shapeloop.low", "shapeloop.high"]]


def test_the_modes_and_stop_reasons_are_still_where_callers_import_them() -> None:
    from shapeloop import Mode, StopReason, choose_mode
    from shapeloop.modes import Mode as Moved
    from shapeloop.run import Mode as Kept
    from shapeloop.run import StopReason as KeptStop
    from shapeloop.run import choose_mode as kept_choose

    assert Mode is Moved is Kept and StopReason is KeptStop and choose_mode is kept_choose
