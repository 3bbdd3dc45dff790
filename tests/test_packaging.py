"""What pyproject.toml promises: every module-level import is a declared dependency of the extra
that needs it, the floors CI installs are the ones declared, and the CLI works without extras."""

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "shapeloop"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# import name -> distribution name, where they differ
DISTRIBUTION = {"llama_cpp": "llama-cpp-python", "json_repair": "json_repair"}
# a module that may import (at module level) what one extra installs
EXTRA_OF = {
    "backends/llamacpp.py": "local",
    "backends/_llama.py": "local",
    "backends/_fast.py": "local",
    "testing.py": "testing",
}


def _names(requirements: list[str]) -> dict[str, str]:
    """``{distribution: floor}``; no floor is ``""``."""
    found = {}
    for requirement in requirements:
        match = re.match(r"([A-Za-z0-9_.-]+)(?:[>=]=([0-9.]+))?", requirement)
        assert match, requirement
        found[match.group(1).lower().replace("_", "-")] = match.group(2) or ""
    return found


def _module_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    statements = list(tree.body)
    while statements:
        node = statements.pop()
        if isinstance(node, ast.Try):  # an import guarded at module level is still made on import
            statements += node.body
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found - {"__future__", "shapeloop"} - set(sys.stdlib_module_names)


def test_every_module_level_import_is_declared_for_the_extra_that_needs_it() -> None:
    core = _names(PROJECT["dependencies"])
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        extra = EXTRA_OF.get(relative)
        allowed = core | (_names(PROJECT["optional-dependencies"][extra]) if extra else {})
        for module in _module_level_imports(path):
            distribution = DISTRIBUTION.get(module, module).lower().replace("_", "-")
            assert distribution in allowed, (
                f"{relative} imports {module} at module level; declare it or import it lazily"
            )


def test_the_floors_ci_installs_are_the_declared_floors() -> None:
    declared: dict[str, set[str]] = {}
    for requirements in [PROJECT["dependencies"], *PROJECT["optional-dependencies"].values()]:
        for name, floor in _names(requirements).items():
            if floor:
                declared.setdefault(name, set()).add(floor)
    pins = {}
    for line in (ROOT / ".ci" / "floors.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version
    for name, version in pins.items():
        assert declared.get(name) == {version}, (
            f"{name}: floors.txt pins {version}, pyproject says {declared.get(name)}"
        )
    for name in _names(PROJECT["dependencies"]):
        assert name in pins, f"core dependency {name} is not in .ci/floors.txt"


BLOCKED = """
import sys
for name in ("numpy", "llama_cpp", "llguidance", "ollama", "instructor", "openai"):
    sys.modules[name] = None  # as if not installed
from shapeloop.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_cli_without_the_local_extra_says_how_to_install_it(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "SHAPELOOP_CACHE": str(tmp_path / "cache")}
    for backend, extra in [("llamacpp", "local"), ("ollama", "ollama")]:
        done = subprocess.run(
            [sys.executable, "-c", BLOCKED, "run", "t", "--root", str(tmp_path), "--backend", backend, "--model", "m"],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert f"pip install 'shapeloop[{extra}]'" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "cache").exists()
