"""Function-calling tasks: a question, the tools offered, the right first call, and a check of the answer.

Kinds: ``call`` (one function: optional arguments, enums, defaults, units, formats, code), ``choose``
(two to four similar tools, one fits), ``nested`` (object and array arguments), ``irrelevant`` (no
offered tool fits: the right first step is an answer) and ``multi`` (two or three calls, each needing
the one before). The set is written like what users bring (BFCL's simple, multiple, irrelevance and
"live" questions), half formal, half typed the way people type; nothing in it is tuned to a prompt.

A task is scored twice: on its first step (:func:`first_call_ok`: the right tool with allowed
arguments, or an answer where no tool fits) and end to end (``check`` on the final answer, after the
loop has run the tools). Every tool is a real, deterministic function: no network, no clock.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import math
import operator
import re
import sqlite3
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Final, Literal

from benchmarks.tasks import Check
from shapeloop import Tool, ToolFailure, tool


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


OMIT: Final[Any] = _Omit()
"""In an allowed-values tuple: the argument may be left out."""

KINDS: Final = ("call", "choose", "nested", "irrelevant", "multi")


@dataclass(frozen=True, kw_only=True)
class Expected:
    """A call the task allows.

    Args:
        tool: the tool's name, exactly.
        args: every argument the call may carry -> its allowed values. ``OMIT`` among them: the
            argument may be left out. A dict among them is matched key by key, its values being
            alternatives in the same way (a tuple) or one plain value; a list element by element.
    """

    tool: str
    args: Mapping[str, tuple[Any, ...]]


@dataclass(frozen=True, kw_only=True)
class CallTask:
    """One function-calling task.

    Args:
        name: unique, kebab-case.
        kind: one of :data:`KINDS`.
        prompt: the user's question, as the user wrote it.
        tools: the tools offered, each with a real deterministic function.
        first: the right first call; None where no offered tool fits and the right step is an answer.
        check: the end-to-end check of the final answer.
        chain: for ``multi`` tasks, the calls after ``first``, in order, with the values the earlier
            results give.
    """

    name: str
    kind: str
    prompt: str
    tools: tuple[Tool, ...]
    first: Expected | None
    check: Check
    chain: tuple[Expected, ...] = ()


# ---------------------------------------------------------------------------------------------
# Matching a call against what the task allows


def first_call_ok(task: CallTask, tool: str | None, args: Mapping[str, Any] | None) -> tuple[bool, str]:
    """(ok, why-not). tool None means the first step was an answer (right only when task.first is None)."""
    if task.first is None:
        if tool is None:
            return True, ""
        return False, f"called {tool!r}, but no offered tool fits: the right first step is an answer"
    if tool is None:
        return False, f"answered, but {task.first.tool!r} fits the question"
    return call_ok(task.first, tool, args or {})


def call_ok(expected: Expected, tool: str, args: Mapping[str, Any]) -> tuple[bool, str]:
    """(ok, why-not) for one call against one allowed call."""
    if tool != expected.tool:
        return False, f"called {tool!r}, expected {expected.tool!r}"
    why = _object_mismatch(expected.args, args, "")
    return why is None, why or ""


def value_matches(given: Any, allowed: Any) -> bool:
    """Whether one given JSON value matches one allowed value (a tuple: any of its values).

    Numbers compare numerically (5 == 5.0) but a string or a bool is not a number; strings compare
    after strip and casefold, otherwise exactly; lists element by element in order; dicts by key.
    """
    if isinstance(allowed, tuple):
        return any(value_matches(given, one) for one in allowed if one is not OMIT)
    if isinstance(allowed, bool) or isinstance(given, bool):
        return isinstance(allowed, bool) and isinstance(given, bool) and given == allowed
    if isinstance(allowed, int | float):
        return isinstance(given, int | float) and given == allowed
    if isinstance(allowed, str):
        return isinstance(given, str) and given.strip().casefold() == allowed.strip().casefold()
    if isinstance(allowed, Mapping):
        return _object_mismatch(_as_spec(allowed), given, "") is None
    if isinstance(allowed, list):
        return (
            isinstance(given, list)
            and len(given) == len(allowed)
            and all(value_matches(g, a) for g, a in zip(given, allowed, strict=True))
        )
    if allowed is None:
        return given is None
    raise TypeError(f"cannot match against {allowed!r}: use JSON values, tuples of them, or OMIT")


def _as_spec(allowed: Mapping[str, Any]) -> dict[str, tuple[Any, ...]]:
    return {key: value if isinstance(value, tuple) else (value,) for key, value in allowed.items()}


def _object_mismatch(spec: Mapping[str, tuple[Any, ...]], given: Any, where: str) -> str | None:
    if not isinstance(given, Mapping):
        return f"{where or 'the arguments'}: expected an object, got {given!r}"
    extra = sorted(set(given) - set(spec))
    if extra:
        return f"unexpected argument {where}{extra[0]!r}; the call may carry {sorted(spec)}"
    for key, allowed in spec.items():
        if key not in given:
            if any(one is OMIT for one in allowed):
                continue
            return f"missing argument {where}{key!r}"
        if not value_matches(given[key], allowed):
            shown = [one for one in allowed if one is not OMIT]
            return f"{where}{key}={given[key]!r} is none of {shown!r}"
    return None


def canonical_args(spec: Mapping[str, tuple[Any, ...]], *, minimal: bool = False) -> dict[str, Any]:
    """A call built from the first allowed non-OMIT value of each argument.

    ``minimal`` leaves out every argument that may be left out.
    """
    out: dict[str, Any] = {}
    for key, allowed in spec.items():
        if minimal and any(one is OMIT for one in allowed):
            continue
        out[key] = _canonical(allowed, minimal)
    return out


def _canonical(allowed: Any, minimal: bool) -> Any:
    if isinstance(allowed, tuple):
        return _canonical(next(one for one in allowed if one is not OMIT), minimal)
    if isinstance(allowed, Mapping):
        return canonical_args(_as_spec(allowed), minimal=minimal)
    if isinstance(allowed, list):
        return [_canonical(one, minimal) for one in allowed]
    return allowed


# ---------------------------------------------------------------------------------------------
# Checks of the final answer: whole words and whole numbers, never substrings

_NUMBER = re.compile(r"(?<![\d.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\d|\.\d)")


def numbers_in(text: str) -> list[float]:
    """The whole numbers written in ``text`` ("1,234.5" is one number; "1234" holds no 23)."""
    return [float(found.replace(",", "")) for found in _NUMBER.findall(text)]


def has_number(value: float, *, tolerance: float = 0.0) -> Check:
    """The answer writes ``value`` as a whole number (within ``tolerance``)."""

    def check(answer: str, root: Path) -> bool:
        return any(abs(n - value) <= tolerance + 1e-9 for n in numbers_in(answer))

    return check


def _flat(answer: str) -> str:
    """An answer casefolded, its typographic apostrophes written as "'" ("isn’t" as "isn't")."""
    return answer.casefold().replace("\u2019", "'")


def _word(phrase: str) -> re.Pattern[str]:
    parts = [re.escape(part) for part in phrase.casefold().split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(parts) + r"(?!\w)")


def says_word(*phrases: str) -> Check:
    """The answer says every phrase as whole words, case aside ("snowing" does not say "no")."""
    patterns = [_word(p) for p in phrases]

    def check(answer: str, root: Path) -> bool:
        flat = _flat(answer)
        return all(p.search(flat) for p in patterns)

    return check


def says_any(*phrases: str) -> Check:
    """The answer says at least one of the phrases as whole words."""
    patterns = [_word(p) for p in phrases]

    def check(answer: str, root: Path) -> bool:
        flat = _flat(answer)
        return any(p.search(flat) for p in patterns)

    return check


def says_none(*phrases: str) -> Check:
    """The answer says none of the phrases as whole words."""
    found = says_any(*phrases)
    return lambda answer, root: not found(answer, root)


def begins_with_word(word: str) -> Check:
    """The answer's first word is ``word`` ("No, it is 35 minutes late."), case aside."""
    pattern = re.compile(r"\W*" + re.escape(word.casefold()) + r"(?!\w)")
    return lambda answer, root: pattern.match(_flat(answer)) is not None


def all_of(*checks: Check) -> Check:
    """Every check passes."""
    return lambda answer, root: all(c(answer, root) for c in checks)


def any_of(*checks: Check) -> Check:
    """At least one check passes."""
    return lambda answer, root: any(c(answer, root) for c in checks)


def any_answer(answer: str, root: Path) -> bool:
    """Any non-empty answer (irrelevance tasks are judged on whether a tool was called)."""
    return bool(answer.strip())


# ---------------------------------------------------------------------------------------------
# Tools. About half are typed functions under @tool, half hand-written JSON schemas.


def _object(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def _key(text: str) -> str:
    """A lookup key: the part before a comma, stripped and casefolded ("Lisbon, Portugal" -> "lisbon")."""
    return text.split(",")[0].strip().casefold()


def _lookup(table: Mapping[str, Any], key: str, what: str) -> Any:
    try:
        return table[_key(key)]
    except KeyError:
        known = ", ".join(sorted(table))
        raise ToolFailure(f"no {what} {key!r}; known: {known}") from None


def _iso_date(text: str, what: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise ToolFailure(f"{what} must be a date written YYYY-MM-DD (e.g. 2024-03-03), not {text!r}") from None


# --- maths, physics, code ---------------------------------------------------------------------


@tool
def calculate_triangle_area(base: float, height: float, unit: Literal["cm", "m", "in"] = "cm") -> str:
    """Calculate the area of a triangle from its base and height.

    Args:
        base: length of the base.
        height: height measured perpendicular to the base.
        unit: unit of both lengths; the area is in that unit squared.
    """
    return f"area: {base * height / 2:g} square {unit}"


hypot = Tool(
    name="math.hypot",
    description="Euclidean norm sqrt(x*x + y*y): the hypotenuse of a right triangle with legs x and y.",
    parameters=_object(
        {"x": {"type": "number", "description": "first leg"}, "y": {"type": "number", "description": "second leg"}},
        "x",
        "y",
    ),
    fn=lambda x, y: f"hypotenuse: {math.hypot(x, y):g}",
)


@tool
def solve_quadratic(a: float, b: float, c: float, root_type: Literal["real", "all"] = "all") -> str:
    """Solve a*x**2 + b*x + c = 0.

    Args:
        a: coefficient of x squared (not 0).
        b: coefficient of x.
        c: constant term.
        root_type: 'real' for real roots only, 'all' to include complex roots.
    """
    if a == 0:
        raise ToolFailure("a must not be 0: that is a linear equation")
    disc = b * b - 4 * a * c
    if disc >= 0:
        roots = sorted({(-b - math.sqrt(disc)) / (2 * a), (-b + math.sqrt(disc)) / (2 * a)})
        return "roots: " + ", ".join(f"{r:g}" for r in roots)
    if root_type == "real":
        return "no real roots (the discriminant is negative)"
    re_part, im_part = -b / (2 * a), math.sqrt(-disc) / (2 * abs(a))
    return f"roots: {re_part:g} + {im_part:g}i, {re_part:g} - {im_part:g}i"


_OPERATORS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}  # fmt: skip
_FUNCTIONS: dict[str, Callable[[float], float]] = {"sin": math.sin, "cos": math.cos, "exp": math.exp,
                                                   "sqrt": math.sqrt, "log": math.log}  # fmt: skip


def _evaluate(node: ast.AST, x: float) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, x)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.Name) and node.id == "x":
        return x
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand, x)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left, x), _evaluate(node.right, x))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitXor):
        raise ToolFailure("^ is not a power in Python: write x**2")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS and node.args:
        return _FUNCTIONS[node.func.id](_evaluate(node.args[0], x))
    raise ToolFailure(f"unsupported in the expression: {ast.dump(node)[:60]}; use x, numbers, + - * / **, sin, cos")


def _integrate(python_expression: str, lower: float, upper: float) -> str:
    try:
        tree = ast.parse(python_expression.strip(), mode="eval")
    except SyntaxError:
        raise ToolFailure(f"not a Python expression: {python_expression!r}; write e.g. 'x**2 + 3*x'") from None
    steps = 1000
    width = (upper - lower) / steps
    try:
        total = _evaluate(tree, lower) + _evaluate(tree, upper)
        for i in range(1, steps):
            total += (4 if i % 2 else 2) * _evaluate(tree, lower + i * width)
    except (ArithmeticError, ValueError) as exc:
        raise ToolFailure(f"{python_expression} cannot be evaluated on [{lower:g}, {upper:g}]: {exc}") from None
    return f"integral of {python_expression} from {lower:g} to {upper:g}: {total * width / 3:.4f}"


integrate = Tool(
    name="integrate",
    description="Definite integral of a function of x, by Simpson's rule.",
    parameters=_object(
        {
            "python_expression": {"type": "string", "description": "the integrand as a Python expression in x, "
                                  "e.g. 'x**2 + 1' (functions: sin, cos, exp, sqrt, log)"},
            "lower": {"type": "number", "description": "lower bound"},
            "upper": {"type": "number", "description": "upper bound"},
        },
        "python_expression", "lower", "upper",
    ),
    fn=_integrate,
)  # fmt: skip


def _database(name: str) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    if name == "sales":
        db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, country TEXT)")
        countries = ["Norway"] * 13 + ["Sweden"] * 9 + ["Denmark"] * 6 + ["Finland"] * 4
        db.executemany("INSERT INTO customers VALUES (?, ?, ?)",
                       [(i + 1, f"Customer {i + 1}", c) for i, c in enumerate(countries)])  # fmt: skip
    else:
        db.execute("CREATE TABLE employees (id INTEGER PRIMARY KEY, name TEXT, department TEXT, salary INTEGER)")
        db.executemany("INSERT INTO employees VALUES (?, ?, ?, ?)",
                       [(1, "Ana", "sales", 52000), (2, "Bo", "finance", 61000),
                        (3, "Cy", "sales", 48000)])  # fmt: skip
    return db


def _run_sql(query: str, database: str = "sales") -> str:
    if not query.strip().casefold().startswith("select"):
        raise ToolFailure("only SELECT queries are allowed")
    try:
        cursor = _database(database).execute(query)
    except sqlite3.Error as exc:
        raise ToolFailure(f"SQL error: {exc}; tables: customers(id, name, country) in sales, "
                          "employees(id, name, department, salary) in hr") from None  # fmt: skip
    columns = ", ".join(d[0] for d in cursor.description)
    rows = ["; ".join(str(v) for v in row) for row in cursor.fetchmany(20)]
    return f"columns: {columns}\n" + "\n".join(rows or ["(no rows)"])


run_sql = Tool(
    name="run_sql",
    description="Run a read-only SQL query (SQLite dialect) against a company database and return the rows.",
    parameters=_object(
        {
            "query": {"type": "string", "description": "one SQL SELECT statement"},
            "database": {"type": "string", "enum": ["sales", "hr"], "default": "sales",
                         "description": "which database: sales has customers(id, name, country); "
                         "hr has employees(id, name, department, salary)"},
        },
        "query",
    ),
    fn=_run_sql,
)  # fmt: skip


@tool
def hash_text(text: str, algorithm: Literal["md5", "sha1", "sha256", "crc32"] = "sha256") -> str:
    """Compute a checksum or hash of a text (UTF-8), as lowercase hex.

    Args:
        text: the text to hash, exactly as given.
        algorithm: the hash function.
    """
    data = text.encode()
    digest = f"{zlib.crc32(data):08x}" if algorithm == "crc32" else hashlib.new(algorithm, data).hexdigest()
    return f"{algorithm}: {digest}"


@tool
def slugify(text: str, separator: Literal["-", "_"] = "-") -> str:
    """Turn a text into a URL slug: lowercase letters and digits joined by a separator.

    Args:
        text: the text to turn into a slug.
        separator: the character between words.
    """
    return "slug: " + separator.join(re.findall(r"[a-z0-9]+", text.casefold()))


@tool
def count_words(text: str) -> str:
    """Count the words in a text.

    Args:
        text: the text.
    """
    return f"words: {len(text.split())}"


@tool
def projectile_range(speed: float, angle_degrees: float, gravity: float = 9.81) -> str:
    """Horizontal range of a projectile launched from the ground, without air resistance.

    Args:
        speed: launch speed in m/s.
        angle_degrees: launch angle above the horizontal, in degrees.
        gravity: gravitational acceleration in m/s^2.
    """
    return f"range: {speed**2 * math.sin(math.radians(2 * angle_degrees)) / gravity:.2f} m"


kinetic_energy = Tool(
    name="physics.kinetic_energy",
    description="Kinetic energy (1/2 m v^2) of a moving body, in joules.",
    parameters=_object(
        {"mass_kg": {"type": "number", "exclusiveMinimum": 0, "description": "mass in kilograms"},
         "velocity_m_s": {"type": "number", "description": "speed in metres per second"}},
        "mass_kg", "velocity_m_s",
    ),
    fn=lambda mass_kg, velocity_m_s: f"kinetic energy: {0.5 * mass_kg * velocity_m_s**2:,.1f} J",
)  # fmt: skip


def _determinant(matrix: list[list[float]]) -> str:
    n = len(matrix)
    if any(len(row) != n for row in matrix):
        raise ToolFailure("the matrix must be square: every row as long as there are rows")
    rows = [[float(v) for v in row] for row in matrix]
    det = 1.0
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(rows[r][col]))
        if rows[pivot][col] == 0:
            return "determinant: 0"
        if pivot != col:
            rows[col], rows[pivot] = rows[pivot], rows[col]
            det = -det
        det *= rows[col][col]
        for r in range(col + 1, n):
            factor = rows[r][col] / rows[col][col]
            rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col], strict=True)]
    return f"determinant: {det:g}"


determinant = Tool(
    name="linalg.det",
    description="Determinant of a square matrix.",
    parameters=_object(
        {"matrix": {"type": "array", "description": "the matrix as a list of rows",
                    "items": {"type": "array", "items": {"type": "number"}}, "minItems": 1}},
        "matrix",
    ),
    fn=_determinant,
)  # fmt: skip


mean = Tool(
    name="statistics.mean",
    description="Arithmetic mean of a list of numbers.",
    parameters=_object(
        {"numbers": {"type": "array", "items": {"type": "number"}, "minItems": 1, "description": "the numbers"}},
        "numbers",
    ),
    fn=lambda numbers: f"mean: {sum(numbers) / len(numbers):g}",
)


# --- units, cooking, health ---------------------------------------------------------------------

_METRES = {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "in": 0.0254, "ft": 0.3048, "yd": 0.9144, "mi": 1609.344}


def _convert_length(value: float, from_unit: str, to_unit: str) -> str:
    result = value * _METRES[from_unit] / _METRES[to_unit]
    return f"{value:g} {from_unit} = {result:.3f} {to_unit}"


convert_length = Tool(
    name="convert_length",
    description="Convert a length from one unit to another.",
    parameters=_object(
        {
            "value": {"type": "number", "description": "the length to convert"},
            "from_unit": {"type": "string", "enum": list(_METRES), "description": "unit of the value"},
            "to_unit": {"type": "string", "enum": list(_METRES), "description": "unit to convert to"},
        },
        "value", "from_unit", "to_unit",
    ),
    fn=_convert_length,
)  # fmt: skip


@tool
def convert_temperature(
    value: float,
    from_unit: Literal["celsius", "fahrenheit", "kelvin"],
    to_unit: Literal["celsius", "fahrenheit", "kelvin"],
) -> str:
    """Convert a temperature between Celsius, Fahrenheit and Kelvin.

    Args:
        value: the temperature to convert.
        from_unit: scale of the value.
        to_unit: scale to convert to.
    """
    to_celsius = {"celsius": lambda v: v, "fahrenheit": lambda v: (v - 32) * 5 / 9, "kelvin": lambda v: v - 273.15}
    from_celsius = {"celsius": lambda v: v, "fahrenheit": lambda v: v * 9 / 5 + 32, "kelvin": lambda v: v + 273.15}
    return f"{value:g} {from_unit} = {from_celsius[to_unit](to_celsius[from_unit](value)):.1f} {to_unit}"


_MILLILITRES = {"cup": 236.588, "tbsp": 14.787, "tsp": 4.929, "ml": 1.0, "fl_oz": 29.574}


def _convert_measure(amount: float, from_unit: str, to_unit: str) -> str:
    return f"{amount:g} {from_unit} = {amount * _MILLILITRES[from_unit] / _MILLILITRES[to_unit]:.2f} {to_unit}"


convert_cooking_measure = Tool(
    name="convertCookingMeasure",
    description="Convert a kitchen volume measure (US cups, tablespoons, teaspoons, fluid ounces, millilitres).",
    parameters=_object(
        {
            "amount": {"type": "number", "description": "how much"},
            "from_unit": {"type": "string", "enum": list(_MILLILITRES), "description": "unit of the amount"},
            "to_unit": {"type": "string", "enum": list(_MILLILITRES), "description": "unit to convert to"},
        },
        "amount", "from_unit", "to_unit",
    ),
    fn=_convert_measure,
)  # fmt: skip


@tool
def calculate_bmi(weight: float, height: float, system: Literal["metric", "imperial"] = "metric") -> str:
    """Body mass index from weight and height.

    Args:
        weight: body weight, in kg (metric) or pounds (imperial).
        height: height, in metres (metric) or inches (imperial).
        system: the unit system of weight and height.
    """
    if height <= 0:
        raise ToolFailure("height must be positive")
    bmi = weight / height**2 * (703 if system == "imperial" else 1)
    return f"BMI: {bmi:.1f}"


_METS = {"running": 9.8, "cycling": 7.5, "swimming": 5.8, "walking": 3.5, "yoga": 2.5}


@tool
def calories_burned(
    activity: Literal["running", "cycling", "swimming", "walking", "yoga"], minutes: int, weight_kg: float
) -> str:
    """Estimate the calories burned by an activity (MET method).

    Args:
        activity: the activity.
        minutes: how long, in minutes.
        weight_kg: body weight in kilograms.
    """
    return f"calories burned: {round(_METS[activity] * weight_kg * minutes / 60)} kcal"


_NUTRITION = {"chicken_breast": (165, 31.0), "white_rice_cooked": (130, 2.7), "broccoli": (34, 2.8),
              "egg": (155, 13.0), "rolled_oats": (389, 16.9)}  # fmt: skip


def _nutrition_totals(items: list[dict[str, Any]]) -> str:
    kcal = sum(_NUTRITION[i["food"]][0] * i["grams"] / 100 for i in items)
    protein = sum(_NUTRITION[i["food"]][1] * i["grams"] / 100 for i in items)
    return f"total: {kcal:.0f} kcal, {protein:.1f} g protein"


nutrition_totals = Tool(
    name="nutrition_totals",
    description="Total calories and protein of a list of foods, from a nutrition table (per 100 g).",
    parameters=_object(
        {"items": {"type": "array", "minItems": 1, "description": "the foods eaten",
                   "items": _object({"food": {"type": "string", "enum": list(_NUTRITION), "description": "the food"},
                                     "grams": {"type": "number", "description": "weight in grams"}},
                                    "food", "grams")}},
        "items",
    ),
    fn=_nutrition_totals,
)  # fmt: skip


def _log_workout(exercises: list[dict[str, Any]]) -> str:
    volume = sum(e["sets"] * e["reps"] * e.get("weight_kg", 0) for e in exercises)
    sets = sum(e["sets"] for e in exercises)
    return f"logged {len(exercises)} exercises, {sets} sets, total volume {volume:g} kg"


log_workout = Tool(
    name="log_workout",
    description="Log a strength workout and report its total volume (sets x reps x weight).",
    parameters=_object(
        {"exercises": {"type": "array", "minItems": 1, "description": "the exercises done", "items": _object(
            {"name": {"type": "string", "description": "exercise name, e.g. 'deadlift'"},
             "sets": {"type": "integer", "minimum": 1, "description": "number of sets"},
             "reps": {"type": "integer", "minimum": 1, "description": "repetitions per set"},
             "weight_kg": {"type": "number", "description": "load in kg; leave out for body-weight exercises"}},
            "name", "sets", "reps")}},
        "exercises",
    ),
    fn=_log_workout,
)  # fmt: skip


@tool
def bpm_to_ms(bpm: float, note: Literal["whole", "half", "quarter", "eighth", "sixteenth"] = "quarter") -> str:
    """Delay time in milliseconds of a note value at a tempo (for delay and reverb settings).

    Args:
        bpm: tempo in beats per minute.
        note: the note value.
    """
    beats = {"whole": 4, "half": 2, "quarter": 1, "eighth": 0.5, "sixteenth": 0.25}[note]
    return f"{note} note at {bpm:g} bpm: {60000 / bpm * beats:.2f} ms"


# --- weather, geography, travel -------------------------------------------------------------------

_WEATHER = {"lisbon": ("Lisbon", 19, "sunny, wind 12 km/h"), "reykjavik": ("Reykjavik", -2, "light snow"),
            "tromsø": ("Tromsø", -7, "snow showers"), "tromso": ("Tromsø", -7, "snow showers"),
            "oslo": ("Oslo", 4, "overcast"),
            "tokyo": ("Tokyo", 23, "clear"), "bergen": ("Bergen", 8, "rain")}  # fmt: skip


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Get the current weather in a city.

    Args:
        city: the city's name, e.g. "Oslo" or "Oslo, Norway".
        unit: the temperature unit.
    """
    name, celsius, sky = _lookup(_WEATHER, city, "weather station for")
    temp = celsius if unit == "celsius" else round(celsius * 9 / 5 + 32)
    return f"{name} now: {temp} °{unit[0].upper()}, {sky}"


_FORECAST = {"bergen": ("Bergen", [(11, 6, 14), (9, 4, 3), (12, 7, 0)]),
             "oslo": ("Oslo", [(6, -1, 0), (5, -2, 2), (7, 0, 0)])}  # fmt: skip


def _forecast(city: str, days: int = 3) -> str:
    name, daily = _lookup(_FORECAST, city, "forecast for")
    parts = [f"day {i + 1}: high {hi} °C, low {lo} °C, rain {mm} mm" for i, (hi, lo, mm) in enumerate(daily[:days])]
    return f"{name} forecast ({min(days, len(daily))} days, day 1 is tomorrow): " + "; ".join(parts)


get_forecast = Tool(
    name="get_forecast",
    description="Daily weather forecast for a city, starting tomorrow.",
    parameters=_object(
        {"city": {"type": "string", "description": "city name"},
         "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 3, "description": "how many days"}},
        "city",
    ),
    fn=_forecast,
)  # fmt: skip


_AIR = {
    "delhi": ("Delhi", 187, "unhealthy"),
    "new delhi": ("New Delhi", 187, "unhealthy"),
    "oslo": ("Oslo", 21, "good"),
}

get_air_quality = Tool(
    name="get_air_quality",
    description="Current air quality index (AQI) of a city.",
    parameters=_object({"city": {"type": "string", "description": "city name"}}, "city"),
    fn=lambda city: "{} AQI now: {} ({})".format(*_lookup(_AIR, city, "air quality station for")),
)


_COORDINATES = {"porto": ("Porto, Portugal", 41.1579, -8.6291), "quito": ("Quito, Ecuador", -0.1807, -78.4678),
                "guayaquil": ("Guayaquil, Ecuador", -2.1710, -79.9224), "oslo": ("Oslo, Norway", 59.9139, 10.7522),
                "lisbon": ("Lisbon, Portugal", 38.7223, -9.1393)}  # fmt: skip
_ZONES = [(41.1579, -8.6291, "Europe/Lisbon, UTC+00:00 (WET)"), (-0.1807, -78.4678, "America/Guayaquil, UTC-05:00"),
          (-2.1710, -79.9224, "America/Guayaquil, UTC-05:00"), (59.9139, 10.7522, "Europe/Oslo, UTC+01:00 (CET)"),
          (38.7223, -9.1393, "Europe/Lisbon, UTC+00:00 (WET)")]  # fmt: skip


@tool
def geocode(city: str) -> str:
    """Latitude and longitude of a city.

    Args:
        city: the city's name.
    """
    name, lat, lon = _lookup(_COORDINATES, city, "coordinates for")
    return f"{name}: latitude {lat}, longitude {lon}"


def _timezone(latitude: float, longitude: float) -> str:
    for lat, lon, zone in _ZONES:
        if abs(lat - latitude) <= 1 and abs(lon - longitude) <= 1:
            return f"time zone at ({latitude:g}, {longitude:g}): {zone}"
    raise ToolFailure(f"no time zone data near ({latitude}, {longitude}); give coordinates from geocode")


get_timezone = Tool(
    name="get_timezone",
    description="Time zone (IANA name and UTC offset) at a point given by its coordinates.",
    parameters=_object(
        {"latitude": {"type": "number", "minimum": -90, "maximum": 90, "description": "decimal degrees"},
         "longitude": {"type": "number", "minimum": -180, "maximum": 180, "description": "decimal degrees"}},
        "latitude", "longitude",
    ),
    fn=_timezone,
)  # fmt: skip


def _great_circle(lat1: float, lon1: float, lat2: float, lon2: float) -> str:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return f"distance: {2 * 6371.0 * math.asin(math.sqrt(h)):.1f} km"


geo_distance = Tool(
    name="geo.distance",
    description="Great-circle distance in km between two points given by latitude and longitude.",
    parameters=_object(
        {k: {"type": "number", "description": d} for k, d in
         (("lat1", "latitude of the first point"), ("lon1", "longitude of the first point"),
          ("lat2", "latitude of the second point"), ("lon2", "longitude of the second point"))},
        "lat1", "lon1", "lat2", "lon2",
    ),
    fn=_great_circle,
)  # fmt: skip


_ROADS = {frozenset({"madrid", "paris"}): 1053, frozenset({"lyon", "geneva"}): 151, frozenset({"geneva", "turin"}): 262,
          frozenset({"lyon", "turin"}): 312, frozenset({"berlin", "prague"}): 350}  # fmt: skip


@tool
def distance_between(city_a: str, city_b: str, unit: Literal["km", "mi"] = "km") -> str:
    """Driving distance between two cities.

    Args:
        city_a: where the trip starts.
        city_b: where it ends.
        unit: kilometres or miles.
    """
    km = _ROADS.get(frozenset({_key(city_a), _key(city_b)}))
    if km is None:
        raise ToolFailure(f"no road data for {city_a} - {city_b}")
    value = km if unit == "km" else round(km * 0.621371)
    return f"{city_a} to {city_b}: {value} {unit} by road"


def _plan_route(stops: list[str], mode: str = "driving") -> str:
    if len(stops) < 2:
        raise ToolFailure("a route needs at least two stops")
    legs = [_ROADS.get(frozenset({_key(a), _key(b)})) for a, b in itertools.pairwise(stops)]
    if None in legs:
        raise ToolFailure("no road data for one of the legs; known cities: Lyon, Geneva, Turin, Madrid, Paris")
    speed = {"driving": 80, "cycling": 18}[mode]
    total = sum(leg for leg in legs if leg is not None)
    return f"{mode} route {' -> '.join(stops)}: {total} km, about {total / speed:.1f} h"


plan_route = Tool(
    name="planRoute",
    description="Plan a route through several stops in order and give its length and duration.",
    parameters=_object(
        {"stops": {"type": "array", "items": {"type": "string"}, "minItems": 2,
                   "description": "city names in the order visited, start first"},
         "mode": {"type": "string", "enum": ["driving", "cycling"], "default": "driving",
                  "description": "how the route is travelled"}},
        "stops",
    ),
    fn=_plan_route,
)  # fmt: skip


@tool
def lookup_postcode(postcode: str, country: str) -> str:
    """The town of a postcode.

    Args:
        postcode: the postcode as written, e.g. "0150".
        country: ISO 3166-1 alpha-2 country code, e.g. "NO".
    """
    towns = {("9008", "NO"): "Tromsø", ("0150", "NO"): "Oslo", ("1000", "PT"): "Lisbon"}
    town = towns.get((postcode.strip(), country.strip().upper()))
    if town is None:
        raise ToolFailure(f"unknown postcode {postcode} in {country}")
    return f"postcode {postcode} ({country.upper()}): {town}"


_FLIGHTS = {("OSL", "FCO", "2025-06-12"): ["SK4711 07:10-11:05 219 EUR", "FR2914 09:40-13:30 96 EUR",
                                           "AZ609 16:20-20:15 184 EUR"]}  # fmt: skip
_FLIGHT_STATUS = {"LH454": "delayed 35 minutes, new departure 14:05, gate B22",
                  "FR2914": "on time, departs 09:40, gate C14", "SK4711": "on time, departs 07:10, gate D3",
                  "AZ609": "cancelled"}  # fmt: skip


def _search_flights(origin: str, destination: str, date: str, passengers: int = 1) -> str:
    _iso_date(date, "date")
    found = _FLIGHTS.get((origin.upper(), destination.upper(), date))
    if not found:
        return f"no flights from {origin} to {destination} on {date}"
    return f"flights {origin.upper()}-{destination.upper()} on {date} for {passengers}: " + "; ".join(found)


search_flights = Tool(
    name="searchFlights",
    description="Search scheduled flights between two airports on a date, with prices per passenger.",
    parameters=_object(
        {"origin": {"type": "string", "pattern": "^[A-Za-z]{3}$", "description": "IATA code of the departure airport"},
         "destination": {"type": "string", "pattern": "^[A-Za-z]{3}$",
                         "description": "IATA code of the arrival airport"},
         "date": {"type": "string", "format": "date", "description": "departure date, YYYY-MM-DD"},
         "passengers": {"type": "integer", "minimum": 1, "default": 1, "description": "number of travellers"}},
        "origin", "destination", "date",
    ),
    fn=_search_flights,
)  # fmt: skip


@tool(name="getFlightStatus")
def get_flight_status(flight_number: str) -> str:
    """Live status of a flight today: delays, gate, cancellations.

    Args:
        flight_number: airline code and number, e.g. "BA 117".
    """
    key = re.sub(r"\s+", "", flight_number).upper()
    if key not in _FLIGHT_STATUS:
        raise ToolFailure(f"no flight {flight_number} today")
    return f"{key}: {_FLIGHT_STATUS[key]}"


_HOTELS = {"H-8812": ("Gion Garden Inn", 41200, "free cancellation until 24 hours before arrival"),
           "H-8830": ("Kamo River Hotel", 36900, "free cancellation until 72 hours before arrival; breakfast included"),
           "H-8857": ("Nishiki Stay", 52800, "non-refundable")}  # fmt: skip


def _search_hotels(city: str, check_in: str, nights: int, guests: int = 2) -> str:
    _iso_date(check_in, "check_in")
    if _key(city) != "kyoto":
        return f"no hotels found in {city}"
    offers = [f"{hid} {name} {price * nights // 2:,} JPY" for hid, (name, price, _) in _HOTELS.items()]
    return f"hotels in Kyoto from {check_in}, {nights} nights, {guests} guests: " + "; ".join(offers)


search_hotels = Tool(
    name="searchHotels",
    description="Search hotels in a city for given dates; lists each hotel's id, name and total price.",
    parameters=_object(
        {"city": {"type": "string", "description": "city name"},
         "check_in": {"type": "string", "format": "date", "description": "arrival date, YYYY-MM-DD"},
         "nights": {"type": "integer", "minimum": 1, "description": "length of the stay"},
         "guests": {"type": "integer", "minimum": 1, "default": 2, "description": "people sharing a room"}},
        "city", "check_in", "nights",
    ),
    fn=_search_hotels,
)  # fmt: skip


@tool(name="getHotelDetails")
def get_hotel_details(hotel_id: str) -> str:
    """Details of one hotel: name and booking conditions.

    Args:
        hotel_id: the id from a hotel search, e.g. "H-1234".
    """
    if hotel_id.strip().upper() not in _HOTELS:
        raise ToolFailure(f"no hotel {hotel_id}; use an id from searchHotels")
    name, _, policy = _HOTELS[hotel_id.strip().upper()]
    return f"{hotel_id.upper()} {name}: {policy}"


# --- dates ----------------------------------------------------------------------------------------


def _days_between(start_date: str, end_date: str, inclusive: bool = False) -> str:
    days = (_iso_date(end_date, "end_date") - _iso_date(start_date, "start_date")).days
    return f"days from {start_date} to {end_date}: {abs(days) + (1 if inclusive else 0)}"


days_between = Tool(
    name="days_between",
    description="Number of days between two dates.",
    parameters=_object(
        {"start_date": {"type": "string", "format": "date", "description": "first date, YYYY-MM-DD"},
         "end_date": {"type": "string", "format": "date", "description": "second date, YYYY-MM-DD"},
         "inclusive": {"type": "boolean", "default": False, "description": "count both end dates"}},
        "start_date", "end_date",
    ),
    fn=_days_between,
)  # fmt: skip


@tool
def add_days(date: str, days: int) -> str:
    """The date a number of days after (or, if negative, before) a date.

    Args:
        date: the starting date, YYYY-MM-DD.
        days: how many days to add.
    """
    result = _iso_date(date, "date") + timedelta(days=days)
    return f"{date} + {days} days = {result.isoformat()} ({result:%A})"


@tool
def day_of_week(date: str) -> str:
    """The day of the week of a date (proleptic Gregorian calendar).

    Args:
        date: the date, YYYY-MM-DD.
    """
    return f"{date} is a {_iso_date(date, 'date'):%A}"


@tool
def create_event(title: str, date: str, start_time: str, duration_minutes: int = 60,
                 attendees: list[str] | None = None) -> str:  # fmt: skip
    """Create a calendar event and invite people.

    Args:
        title: the event's title.
        date: the day, YYYY-MM-DD.
        start_time: local start time, HH:MM (24-hour).
        duration_minutes: length in minutes.
        attendees: email addresses to invite.
    """
    day = _iso_date(date, "date")
    if not re.fullmatch(r"\d{2}:\d{2}", start_time):
        raise ToolFailure(f"start_time must be HH:MM, e.g. 09:30, not {start_time!r}")
    event_id = zlib.crc32(f"{title}|{day}|{start_time}".encode()) % 90000 + 10000
    guests = len(attendees or [])
    return f"created event EV-{event_id} '{title}' on {day} {start_time} ({duration_minutes} min), {guests} invited"


# --- finance, shopping --------------------------------------------------------------------------

_PER_EUR = {"EUR": 1.0, "USD": 1.087, "JPY": 162.05, "GBP": 0.8571, "NOK": 11.62, "CHF": 0.954}


def _convert_currency(amount: float, from_currency: str, to_currency: str) -> str:
    source, target = from_currency.upper(), to_currency.upper()
    for code in (source, target):
        if code not in _PER_EUR:
            raise ToolFailure(f"unknown currency {code}; known: {', '.join(_PER_EUR)}")
    return f"{amount:,.2f} {source} = {amount / _PER_EUR[source] * _PER_EUR[target]:,.2f} {target}"


convert_currency = Tool(
    name="convert_currency",
    description="Convert an amount of money between currencies at today's reference rate.",
    parameters=_object(
        {"amount": {"type": "number", "description": "the amount in the source currency"},
         "from_currency": {"type": "string", "pattern": "^[A-Za-z]{3}$", "description": "ISO 4217 code, e.g. USD"},
         "to_currency": {"type": "string", "pattern": "^[A-Za-z]{3}$", "description": "ISO 4217 code, e.g. EUR"}},
        "amount", "from_currency", "to_currency",
    ),
    fn=_convert_currency,
)  # fmt: skip


@tool
def add_vat(amount: float, country: Literal["DE", "FR", "NO", "GB", "ES"]) -> str:
    """A net price with the country's standard VAT added.

    Args:
        amount: the net price.
        country: ISO 3166-1 alpha-2 code of the country whose VAT applies.
    """
    rate = {"DE": 19, "FR": 20, "NO": 25, "GB": 20, "ES": 21}[country]
    return f"{amount:,.2f} + {rate}% VAT = {amount * (1 + rate / 100):,.2f}"


@tool
def compound_interest(principal: float, annual_rate: float, years: int, compounds_per_year: int = 12) -> str:
    """Final balance of a deposit with compound interest.

    Args:
        principal: the amount deposited.
        annual_rate: nominal yearly interest rate in percent, e.g. 4.5 for 4.5%.
        years: how many years.
        compounds_per_year: how often interest is added per year (12 = monthly).
    """
    balance = principal * (1 + annual_rate / 100 / compounds_per_year) ** (compounds_per_year * years)
    return f"balance after {years} years: {balance:,.2f}"


_PRICES = {"NVDA": 131.38, "AAPL": 227.52, "MSFT": 415.26}
_COMPANIES = {"NVDA": "NVIDIA Corporation; CEO: Jensen Huang; headquarters: Santa Clara, California",
              "AAPL": "Apple Inc.; CEO: Tim Cook; headquarters: Cupertino, California",
              "MSFT": "Microsoft Corporation; CEO: Satya Nadella; headquarters: Redmond, Washington"}  # fmt: skip


def _symbol(symbol: str) -> str:
    key = symbol.strip().upper()
    if key not in _PRICES:
        raise ToolFailure(f"unknown ticker {symbol!r}; known: {', '.join(_PRICES)}")
    return key


@tool
def get_stock_price(symbol: str) -> str:
    """Latest trading price of a stock.

    Args:
        symbol: the ticker symbol, e.g. "IBM".
    """
    key = _symbol(symbol)
    return f"{key}: {_PRICES[key]} USD"


def _stock_history(symbol: str, days: int = 30) -> str:
    key = _symbol(symbol)
    closes = [round(_PRICES[key] - 0.61 * i + (i % 3) * 1.07, 2) for i in range(min(days, 30))][::-1]
    return f"{key} closing prices, last {len(closes)} trading days, oldest first: " + ", ".join(map(str, closes))


get_stock_history = Tool(
    name="get_stock_history",
    description="Daily closing prices of a stock over recent trading days.",
    parameters=_object(
        {"symbol": {"type": "string", "description": "ticker symbol"},
         "days": {"type": "integer", "minimum": 1, "maximum": 30, "default": 30,
                  "description": "how many trading days back"}},
        "symbol",
    ),
    fn=_stock_history,
)  # fmt: skip


get_company_info = Tool(
    name="get_company_info",
    description="Profile of a listed company: full name, chief executive, headquarters.",
    parameters=_object({"symbol": {"type": "string", "description": "ticker symbol"}}, "symbol"),
    fn=lambda symbol: f"{_symbol(symbol)}: {_COMPANIES[_symbol(symbol)]}",
)


def _portfolio_value(holdings: list[dict[str, Any]]) -> str:
    total = sum(_PRICES[_symbol(h["symbol"])] * h["shares"] for h in holdings)
    return f"portfolio value: {total:,.2f} USD"


portfolio_value = Tool(
    name="portfolio.value",
    description="Current market value of stock holdings at the latest prices.",
    parameters=_object(
        {"holdings": {"type": "array", "minItems": 1, "description": "the positions held", "items": _object(
            {"symbol": {"type": "string", "description": "ticker"},
             "shares": {"type": "number", "exclusiveMinimum": 0, "description": "number of shares"}},
            "symbol", "shares")}},
        "holdings",
    ),
    fn=_portfolio_value,
)  # fmt: skip


def _settle(payments: list[dict[str, Any]]) -> str:
    share = sum(p["amount"] for p in payments) / len(payments)
    balances = {p["name"]: p["amount"] - share for p in payments}
    creditors = [[n, b] for n, b in balances.items() if b > 0.005]
    moves = []
    for name, balance in balances.items():
        owed = -balance
        for creditor in creditors:
            if owed <= 0.005:
                break
            pay = min(owed, creditor[1])
            if pay > 0.005:
                moves.append(f"{name} pays {creditor[0]} {pay:.2f}")
                creditor[1] -= pay
                owed -= pay
    return f"share each: {share:.2f}; " + ("; ".join(moves) or "nobody owes anything")


settle_expenses = Tool(
    name="settle_expenses",
    description="Split shared costs equally and say who pays whom.",
    parameters=_object(
        {"payments": {"type": "array", "minItems": 2, "description": "what each person paid",
                      "items": _object({"name": {"type": "string", "description": "who paid"},
                                        "amount": {"type": "number", "minimum": 0, "description": "paid so far"}},
                                       "name", "amount")}},
        "payments",
    ),
    fn=_settle,
)  # fmt: skip


_PRODUCTS = [("Soundcore Q20i wireless headphones", "audio", 59.99, True, 4.3),
             ("Sony WH-CH720N wireless headphones", "audio", 89.00, True, 4.5),
             ("JBL Tune 520BT wireless headphones", "audio", 44.95, False, 4.2),
             ("Bose QuietComfort 45 wireless headphones", "audio", 179.00, True, 4.7),
             ("Yoga mat, 6 mm", "sports", 24.90, True, 4.1)]  # fmt: skip


def _search_products(query: str, filters: Mapping[str, Any] | None = None) -> str:
    f = dict(filters or {})
    words = query.casefold().split()
    hits = [p for p in _PRODUCTS if any(w in p[0].casefold() for w in words)
            and f.get("category", p[1]) == p[1] and p[2] <= f.get("max_price", math.inf)
            and (p[3] or not f.get("in_stock", False))]  # fmt: skip
    order = {"price_asc": lambda p: p[2], "price_desc": lambda p: -p[2], "rating": lambda p: -p[4]}
    hits.sort(key=order.get(f.get("sort", "relevance"), lambda p: 0))
    return "; ".join(f"{p[0]}: {p[2]:.2f} USD, {'in stock' if p[3] else 'sold out'}" for p in hits) or "no products"


search_products = Tool(
    name="search_products",
    description="Search the shop's catalogue.",
    parameters=_object(
        {"query": {"type": "string", "description": "what to look for"},
         "filters": {**_object(
             {"category": {"type": "string", "enum": ["audio", "books", "clothing", "home", "sports"],
                           "description": "shop department"},
              "max_price": {"type": "number", "description": "highest price in USD"},
              "in_stock": {"type": "boolean", "description": "only products that can ship now"},
              "sort": {"type": "string", "enum": ["relevance", "price_asc", "price_desc", "rating"],
                       "default": "relevance", "description": "order of the results"}}),
             "description": "optional narrowing of the search"}},
        "query",
    ),
    fn=_search_products,
)  # fmt: skip


_SHIPPING = {"GB": (9.50, 3.20), "DE": (6.90, 1.80), "US": (14.00, 4.50)}


def _shipping_quote(destination: Mapping[str, str], weight_kg: float, service: str = "standard") -> str:
    country = destination["country"].strip().upper()
    if country not in _SHIPPING:
        raise ToolFailure(f"no shipping to {country}; country must be an ISO code such as GB, DE, US")
    base, per_kg = _SHIPPING[country]
    price = (base + per_kg * weight_kg) * (1.8 if service == "express" else 1)
    days = "1-2" if service == "express" else "3-5"
    return f"{service} shipping, {weight_kg:g} kg to {destination['city']} ({country}): {price:.2f} EUR, {days} days"


shipping_quote = Tool(
    name="shipping_quote",
    description="Price of shipping a parcel to an address.",
    parameters=_object(
        {"destination": {**_object(
            {"street": {"type": "string", "description": "street and number"},
             "city": {"type": "string", "description": "town or city"},
             "postal_code": {"type": "string", "description": "postcode as written locally"},
             "country": {"type": "string", "pattern": "^[A-Z]{2}$", "description": "ISO 3166-1 alpha-2 code"}},
            "street", "city", "postal_code", "country"), "description": "the delivery address"},
         "weight_kg": {"type": "number", "exclusiveMinimum": 0, "description": "parcel weight in kg"},
         "service": {"type": "string", "enum": ["standard", "express"], "default": "standard",
                     "description": "standard (3-5 days) or express (1-2 days)"}},
        "destination", "weight_kg",
    ),
    fn=_shipping_quote,
)  # fmt: skip


@tool
def lookup_orders(customer_email: str) -> str:
    """The order numbers of a customer, newest first.

    Args:
        customer_email: the customer's email address.
    """
    if customer_email.strip().casefold() != "maria.lopez@example.com":
        raise ToolFailure(f"no customer with email {customer_email}")
    return f"orders of {customer_email}, newest first: 48213 (2024-11-02), 47790 (2024-08-19)"


@tool
def get_order(order_id: int) -> str:
    """One order's contents, total and status.

    Args:
        order_id: the order number.
    """
    orders = {48213: "3 items, total 317.45 EUR, shipped", 47790: "1 item, total 89.90 EUR, delivered"}
    if order_id not in orders:
        raise ToolFailure(f"no order {order_id}; look the number up with lookup_orders")
    return f"order {order_id}: {orders[order_id]}"


# --- sports, music, social ----------------------------------------------------------------------

_STANDINGS = {("arsenal", "premier_league"): "2nd place, 58 points after 27 matches; next match id 90317",
              ("real madrid", "la_liga"): "1st place, 63 points after 26 matches; next match id 90402"}  # fmt: skip


@tool
def get_team_standing(team: str, league: Literal["premier_league", "la_liga", "bundesliga", "serie_a"]) -> str:
    """A team's place in its league table, and the id of its next match.

    Args:
        team: the club's name.
        league: the league.
    """
    found = _STANDINGS.get((_key(team), league))
    if found is None:
        raise ToolFailure(f"{team} is not in the {league} table")
    return f"{team}, {league}: {found}"


@tool
def get_match(match_id: int) -> str:
    """Teams, date and kick-off time of a match.

    Args:
        match_id: the match id.
    """
    matches = {90317: "Brentford vs Arsenal, 2025-03-09 14:00", 90402: "Real Madrid vs Girona, 2025-03-08 21:00"}
    if match_id not in matches:
        raise ToolFailure(f"no match {match_id}")
    return f"match {match_id}: {matches[match_id]}"


def _player_stats(player: str, season: str) -> str:
    stats = {("haaland", "2022-23"): "36 goals, 8 assists in 35 league matches",
             ("haaland", "2023-24"): "27 goals, 5 assists in 31 league matches"}  # fmt: skip
    found = stats.get((_key(player).split()[-1] if player.strip() else "", season))
    if found is None:
        raise ToolFailure(f"no statistics for {player} in {season}")
    return f"{player}, {season}: {found}"


get_player_stats = Tool(
    name="get_player_stats",
    description="A football player's league statistics for one season.",
    parameters=_object(
        {"player": {"type": "string", "description": "the player's full name"},
         "season": {"type": "string", "pattern": r"^\d{4}-\d{2}$", "description": "season as YYYY-YY, e.g. 2021-22"}},
        "player", "season",
    ),
    fn=_player_stats,
)  # fmt: skip


@tool
def search_songs(title: str) -> str:
    """Find songs by title; gives each match's track id.

    Args:
        title: the song's title or part of it.
    """
    if "blinding lights" not in title.casefold():
        return f"no songs match {title!r}"
    return "track 77104: Blinding Lights - The Weeknd (2019); track 80311: Blinding Lights (cover) - Zoe Ray"


@tool
def get_track_details(track_id: int) -> str:
    """Tempo, key and length of a track.

    Args:
        track_id: the track id from search_songs.
    """
    tracks = {77104: "tempo 171 bpm, key F minor, length 3:20", 80311: "tempo 92 bpm, key C minor, length 4:02"}
    if track_id not in tracks:
        raise ToolFailure(f"no track {track_id}")
    return f"track {track_id}: {tracks[track_id]}"


def _user_lookup(username: str) -> str:
    if username.strip().lstrip("@").casefold() != "kestrel_dev":
        raise ToolFailure(f"no user {username}")
    return "user @kestrel_dev: id 5521904, joined 2019-05-14"


user_lookup = Tool(
    name="users.lookup",
    description="Find a user's numeric id from their handle.",
    parameters=_object({"username": {"type": "string", "description": "the handle, with or without @"}}, "username"),
    fn=_user_lookup,
)


def _user_posts(user_id: int, limit: int = 10) -> str:
    if user_id != 5521904:
        raise ToolFailure(f"no user with id {user_id}; find the id with users.lookup")
    posts = ["'Profiling asyncio without tears' (2025-02-11)", "'Why I stopped mocking time' (2025-01-20)"]
    return f"posts of user {user_id}, newest first: " + "; ".join(posts[:limit])


user_posts = Tool(
    name="users.posts",
    description="A user's posts, newest first.",
    parameters=_object(
        {"user_id": {"type": "integer", "description": "the numeric user id"},
         "limit": {"type": "integer", "minimum": 1, "default": 10, "description": "most posts to return"}},
        "user_id",
    ),
    fn=_user_posts,
)  # fmt: skip


# --- HR ------------------------------------------------------------------------------------------

_EMPLOYEES = {"priya raman": ("E-20931", "Finance"), "jonas berg": ("E-30418", "Engineering"),
              "tomás ortega": ("E-11802", "Finance")}  # fmt: skip


@tool(name="findEmployee")
def find_employee(name: str) -> str:
    """Find an employee by name; gives the employee id and department.

    Args:
        name: the person's full name.
    """
    found = _EMPLOYEES.get(_key(name))
    if found is None:
        raise ToolFailure(f"no employee named {name}")
    return f"{name}: employee id {found[0]}, department {found[1]}"


_EMPLOYEE_ID = {"type": "string", "pattern": r"^E-\d{5}$", "description": "employee id, e.g. E-12345"}


def _manager(employee_id: str) -> str:
    if employee_id != "E-20931":
        raise ToolFailure(f"no manager on record for {employee_id}")
    return f"manager of {employee_id}: Tomás Ortega (E-11802)"


get_manager = Tool(name="getManager", description="Who an employee reports to.",
                   parameters=_object({"employee_id": _EMPLOYEE_ID}, "employee_id"), fn=_manager)  # fmt: skip


def _contact(employee_id: str) -> str:
    contacts = {"E-11802": "Tomás Ortega: t.ortega@corp.example, +47 5550 1180",
                "E-20931": "Priya Raman: p.raman@corp.example, +47 5550 2093"}  # fmt: skip
    if employee_id not in contacts:
        raise ToolFailure(f"no contact card for {employee_id}")
    return f"{employee_id} {contacts[employee_id]}"


get_contact = Tool(name="getContact", description="An employee's work email and phone.",
                   parameters=_object({"employee_id": _EMPLOYEE_ID}, "employee_id"), fn=_contact)  # fmt: skip


def _leave(employee_id: str) -> str:
    balances = {"E-30418": 17.5, "E-20931": 9.0, "E-11802": 22.0}
    if employee_id not in balances:
        raise ToolFailure(f"no leave record for {employee_id}; find the id with findEmployee")
    return f"{employee_id}: {balances[employee_id]:g} days of annual leave left"


get_leave_balance = Tool(name="getLeaveBalance", description="How many days of annual leave an employee has left.",
                         parameters=_object({"employee_id": _EMPLOYEE_ID}, "employee_id"), fn=_leave)  # fmt: skip


@tool
def list_open_positions(department: Literal["engineering", "finance", "sales", "support"]) -> str:
    """Open job positions in a department, with their requisition numbers.

    Args:
        department: the department.
    """
    openings = {"engineering": "Backend Engineer (R-3391), Data Engineer (R-3407)",
                "finance": "Payroll Specialist (R-3350)", "sales": "none",
                "support": "Support Lead (R-3412)"}  # fmt: skip
    return f"open positions in {department}: {openings[department]}"


_STAFF = [("Ana Lima", "sales", 7, True), ("Ben Okafor", "sales", 3, True), ("Chen Wei", "sales", 9, False),
          ("Dana Roth", "sales", 5, True), ("Eli Moss", "support", 6, True)]  # fmt: skip


def _search_staff(filters: Mapping[str, Any]) -> str:
    hits = [n for n, dept, years, remote in _STAFF
            if filters.get("department", dept) == dept and years >= filters.get("min_years_of_service", 0)
            and filters.get("remote", remote) == remote]  # fmt: skip
    return f"{len(hits)} employees: " + (", ".join(hits) or "none")


search_staff = Tool(
    name="hr.search_employees",
    description="List employees matching filters.",
    parameters=_object(
        {"filters": {**_object(
            {"department": {"type": "string", "enum": ["engineering", "finance", "sales", "support"],
                            "description": "the employee's department"},
             "min_years_of_service": {"type": "integer", "minimum": 0, "description": "at least this many years"},
             "remote": {"type": "boolean", "description": "true: only remote workers; false: only office workers"}}),
            "description": "conditions every listed employee meets; leave a field out to not filter on it"}},
        "filters",
    ),
    fn=_search_staff,
)  # fmt: skip


# --- files, chemistry, cooking --------------------------------------------------------------------

_FILES = {"/data/reports/q3.pdf": (2481152, "2024-10-01 09:12"),
          "/data/reports/2024/q3-final.pdf": (3145210, "2024-10-03 16:42"),
          "/data/reports/readme.txt": (912, "2024-01-05 08:00")}  # fmt: skip


@tool
def file_info(path: str) -> str:
    """Size and last-modified time of a file.

    Args:
        path: absolute path of the file.
    """
    if path not in _FILES:
        raise ToolFailure(f"no file at {path}")
    size, modified = _FILES[path]
    return f"{path}: {size:,} bytes ({size / 2**20:.2f} MiB), modified {modified}"


@tool
def list_directory(path: str) -> str:
    """Names in a directory (directories end with /).

    Args:
        path: absolute path of the directory.
    """
    prefix = path.rstrip("/") + "/"
    names = sorted({p[len(prefix):].split("/")[0] + ("/" if "/" in p[len(prefix):] else "")
                    for p in _FILES if p.startswith(prefix)})  # fmt: skip
    if not names:
        raise ToolFailure(f"no directory at {path}")
    return f"{path}: " + ", ".join(names)


def _read_text(path: str) -> str:
    if path != "/data/reports/readme.txt":
        raise ToolFailure(f"{path} is not a readable text file")
    return "Quarterly reports. Final versions go under the year's folder."


read_text_file = Tool(
    name="read_text_file",
    description="Read a text file.",
    parameters=_object({"path": {"type": "string", "description": "absolute path"}}, "path"),
    fn=_read_text,
)


def _find_files(name: str, root: str = "/") -> str:
    hits = [p for p in _FILES if p.startswith(root.rstrip("/") + "/") and p.rsplit("/", 1)[1] == name]
    return ", ".join(hits) or f"no file named {name} under {root}"


find_files = Tool(
    name="find_files",
    description="Find files by exact name under a directory.",
    parameters=_object(
        {"name": {"type": "string", "description": "the file name, e.g. notes.txt"},
         "root": {"type": "string", "default": "/", "description": "directory to search under"}},
        "name",
    ),
    fn=_find_files,
)  # fmt: skip


_ATOMIC_MASS = {"H": 1.008, "C": 12.011, "N": 14.007, "O": 15.999, "Na": 22.990, "Cl": 35.45, "S": 32.06,
                "Ca": 40.078, "W": 183.84, "Fe": 55.845}  # fmt: skip


@tool
def molar_mass(formula: str) -> str:
    """Molar mass of a chemical formula without brackets, e.g. "H2SO4".

    Args:
        formula: the formula, element symbols with counts.
    """
    parts = re.findall(r"([A-Z][a-z]?)(\d*)", formula.strip())
    if not parts or "".join(s + n for s, n in parts) != formula.strip():
        raise ToolFailure(f"cannot read the formula {formula!r}; write it like C6H12O6, without brackets")
    unknown = [s for s, _ in parts if s not in _ATOMIC_MASS]
    if unknown:
        raise ToolFailure(f"unknown element {unknown[0]}")
    total = sum(_ATOMIC_MASS[s] * int(n or 1) for s, n in parts)
    return f"{formula}: {total:.3f} g/mol"


element_info = Tool(
    name="chem.element",
    description="Atomic number and standard atomic mass of a chemical element.",
    parameters=_object({"symbol": {"type": "string", "description": "element symbol, e.g. Fe"}}, "symbol"),
    fn=lambda symbol: (f"{symbol}: atomic mass {_ATOMIC_MASS[symbol]}" if symbol in _ATOMIC_MASS
                       else f"ERROR: unknown element symbol {symbol!r}"),
)  # fmt: skip


grams_to_moles = Tool(
    name="chem.grams_to_moles",
    description="Amount of substance in moles from a mass and a molar mass.",
    parameters=_object(
        {"grams": {"type": "number", "exclusiveMinimum": 0, "description": "mass in grams"},
         "molar_mass": {"type": "number", "exclusiveMinimum": 0, "description": "molar mass in g/mol"}},
        "grams", "molar_mass",
    ),
    fn=lambda grams, molar_mass: f"amount: {grams / molar_mass:.4f} mol",
)  # fmt: skip


def _scale_recipe(ingredients: list[dict[str, Any]], factor: float) -> str:
    scaled = [f"{i['name']}: {i['quantity'] * factor:g}{' ' + i['unit'] if i.get('unit') else ''}" for i in ingredients]
    return f"scaled x{factor:g}: " + "; ".join(scaled)


scale_recipe = Tool(
    name="scaleRecipe",
    description="Multiply every ingredient quantity of a recipe by a factor.",
    parameters=_object(
        {"ingredients": {"type": "array", "minItems": 1, "description": "the recipe's ingredients", "items": _object(
            {"name": {"type": "string", "description": "ingredient"},
             "quantity": {"type": "number", "description": "amount in the unit"},
             "unit": {"type": "string", "description": "g, ml, tbsp...; leave out for counted items such as eggs"}},
            "name", "quantity")},
         "factor": {"type": "number", "exclusiveMinimum": 0, "description": "e.g. 2 to double"}},
        "ingredients", "factor",
    ),
    fn=_scale_recipe,
)  # fmt: skip


@tool
def find_recipe(name: str) -> str:
    """Find a recipe by name; gives its id and how many it serves.

    Args:
        name: the dish.
    """
    if "shortbread" not in name.casefold():
        raise ToolFailure(f"no recipe for {name}")
    return "recipe R-5512: Scottish shortbread, serves 8"


@tool
def get_recipe(recipe_id: str, servings: int | None = None) -> str:
    """A recipe's ingredients, scaled to a number of servings.

    Args:
        recipe_id: the recipe id, e.g. "R-1234".
        servings: how many servings to scale to; leave out for the recipe's own number.
    """
    if recipe_id.strip().upper() != "R-5512":
        raise ToolFailure(f"no recipe {recipe_id}; find the id with find_recipe")
    factor = (servings or 8) / 8
    return (f"R-5512 for {servings or 8} servings: butter {228 * factor:g} g, sugar {114 * factor:g} g, "
            f"plain flour {300 * factor:g} g")  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The tasks


def _e(chosen: Tool, **args: Any) -> Expected:
    """An allowed call of ``chosen``; a value that is not a tuple is the one allowed value."""
    return Expected(tool=chosen.name, args={k: v if isinstance(v, tuple) else (v,) for k, v in args.items()})


def _sql(condition: str) -> tuple[str, ...]:
    """The usual ways of writing SELECT COUNT(...) FROM customers WHERE <condition>."""
    spaced = condition.replace("=", " = ")
    return tuple(f"SELECT {count} FROM customers WHERE {cond}{end}" for count in ("COUNT(*)", "COUNT(id)", "COUNT(1)")
                 for cond in (spaced, condition) for end in ("", ";"))  # fmt: skip


def _tasks(kind: str, *rows: tuple[Any, ...]) -> tuple[CallTask, ...]:
    """CallTasks of one kind from (name, prompt, tools, first, check, *chain) rows."""
    return tuple(
        CallTask(name=name, kind=kind, prompt=prompt, tools=tuple(tools), first=first, check=check, chain=tuple(chain))
        for name, prompt, tools, first, check, *chain in rows
    )


_CALL = _tasks(
    "call",
    ("triangle-area", "Calculate the area of a triangle with a base of 10 units and a height of 5 units.",
     [calculate_triangle_area], _e(calculate_triangle_area, base=10, height=5, unit=(OMIT, "cm")), has_number(25)),
    ("hypotenuse-casual", "whats the hypotenuse of a rigth triangle w/ legs 6 and 8",
     [hypot], _e(hypot, x=6, y=8), has_number(10)),
    ("quadratic-real-roots", "Find the real roots only of the equation 2x^2 - 4x - 6 = 0.",
     [solve_quadratic], _e(solve_quadratic, a=2, b=-4, c=-6, root_type="real"), all_of(has_number(3), has_number(-1))),
    ("quadratic-default", "can u solve x^2 + 2x + 5 = 0 for me",
     [solve_quadratic], _e(solve_quadratic, a=1, b=2, c=5, root_type=(OMIT, "all")),
     all_of(has_number(-1), says_any("2i", "2j", "2*i", "2 i"))),
    ("km-to-miles", "Convert 5 km to miles.",
     [convert_length], _e(convert_length, value=5, from_unit="km", to_unit="mi"), has_number(3.107, tolerance=0.01)),
    ("weather-fahrenheit", "hey, what's the weather like in lisbon right now? in farenheit pls",
     [get_weather], _e(get_weather, city=("Lisbon", "Lisbon, Portugal"), unit="fahrenheit"), has_number(66)),
    ("weather-default-unit", "Hello! I am travelling next week. What is the current weather in Reykjavik?",
     [get_weather], _e(get_weather, city=("Reykjavik", "Reykjavik, Iceland"), unit=(OMIT, "celsius")),
     has_number(-2)),
    ("days-between-dates", "How many days are there between March 3rd 2024 and July 14th 2024?",
     [days_between], _e(days_between, start_date="2024-03-03", end_date="2024-07-14", inclusive=(OMIT, False)),
     has_number(133)),
    ("integral-python", "i need the integral of x**2 + 3*x from 0 to 2, python syntax is fine",
     [integrate], _e(integrate, python_expression=("x**2 + 3*x", "x**2+3*x", "x ** 2 + 3 * x", "3*x + x**2"),
                     lower=0, upper=2),
     has_number(8.67, tolerance=0.01)),
    ("sql-count", "Using the sales database, count the customers whose country is Norway. "
     "The table is customers(id, name, country).",
     [run_sql], _e(run_sql, query=_sql("country='Norway'"), database=(OMIT, "sales")), has_number(13)),
    ("crc32-checksum", "what's the crc32 checksum of the string 'shapeloop'?",
     [hash_text], _e(hash_text, text="shapeloop", algorithm="crc32"), says_word("db0320ef")),
    ("compound-interest", "Compute the final balance of $2,500 invested at 4.5% annual interest for 10 years, "
     "compounded quarterly.",
     [compound_interest], _e(compound_interest, principal=2500, annual_rate=4.5, years=10, compounds_per_year=4),
     has_number(3910.94, tolerance=0.01)),
    ("bmi-imperial", "I'm 180 lbs and 70 inches tall, whats my bmi?",
     [calculate_bmi], _e(calculate_bmi, weight=180, height=70, system="imperial"), has_number(25.8, tolerance=0.05)),
    ("euros-to-yen", "Convert 250 euros to Japanese yen.",
     [convert_currency], _e(convert_currency, amount=250, from_currency="EUR", to_currency="JPY"),
     has_number(40512.5, tolerance=0.5)),
    ("slug-underscores", "make a url slug from 'Hello World, Again!' but with underscores instead of dashes",
     [slugify], _e(slugify, text="Hello World, Again!", separator="_"), says_word("hello_world_again")),
    ("add-days", "What date is 45 days after 2024-01-20?",
     [add_days], _e(add_days, date="2024-01-20", days=45), says_any("2024-03-05", "march 5", "5 march", "march 5th")),
    ("projectile-range", "A projectile is launched at 20 m/s at an angle of 45 degrees. Ignoring air resistance, "
     "what is its range?",
     [projectile_range], _e(projectile_range, speed=20, angle_degrees=45, gravity=(OMIT, 9.81, 9.8, 9.80665)),
     has_number(40.77, tolerance=0.05)),
    ("calories-swimming", "roughly how many calories do i burn swiming for 30 min? i weigh 70kg",
     [calories_burned], _e(calories_burned, activity="swimming", minutes=30, weight_kg=70), has_number(203)),
    ("delay-eighth-note", "mixing a track atm - whats the delay time in ms for an eighth note at 128 bpm",
     [bpm_to_ms], _e(bpm_to_ms, bpm=128, note="eighth"), has_number(234.38, tolerance=0.01)),
    ("kinetic-energy", "What is the kinetic energy of a 1,200 kg car moving at 25 m/s?",
     [kinetic_energy], _e(kinetic_energy, mass_kg=1200, velocity_m_s=25), has_number(375000)),
    ("road-miles", "how far is it from madrid to paris by road, in miles? planning a roadtrip",
     [distance_between], _e(distance_between, city_a="Madrid", city_b="Paris", unit="mi"), has_number(654)),
    ("tablespoons-to-ml", "How many millilitres are in 3 tablespoons?",
     [convert_cooking_measure], _e(convert_cooking_measure, amount=3, from_unit="tbsp", to_unit="ml"),
     has_number(44.36, tolerance=0.01)),
)  # fmt: skip

_STOCKS = [get_stock_price, get_stock_history, get_company_info]
_WEATHERS = [get_weather, get_forecast, get_air_quality]
_TRAVEL = [search_flights, get_flight_status, search_hotels]
_FOOTBALL = [get_team_standing, get_player_stats, get_match]
_STAFF_TOOLS = [find_employee, get_leave_balance, list_open_positions]
_FILE_TOOLS = [list_directory, file_info, read_text_file]
_CHEMISTRY = [element_info, molar_mass, grams_to_moles]
_CONVERTERS = [convert_length, convert_temperature, convert_cooking_measure]
_DATES = [days_between, add_days, day_of_week]

_CHOOSE = _tasks(
    "choose",
    ("stock-price", "What is Nvidia's current share price? The ticker is NVDA.",
     _STOCKS, _e(get_stock_price, symbol="NVDA"), has_number(131.38)),
    ("stock-history", "how did AAPL do over the last 5 trading days? closing prices pls",
     _STOCKS, _e(get_stock_history, symbol="AAPL", days=5), has_number(227.52)),
    ("company-ceo", "Who is the chief executive of the company with the ticker MSFT?",
     _STOCKS[::-1], _e(get_company_info, symbol="MSFT"), says_word("nadella")),
    ("forecast-tomorrow", "what's the high gonna be in bergen tomorrow?",
     _WEATHERS, _e(get_forecast, city=("Bergen", "Bergen, Norway"), days=(OMIT, 3, 1, 2)), has_number(11)),
    ("air-quality", "What is the air quality index in Delhi right now?",
     _WEATHERS, _e(get_air_quality, city=("Delhi", "New Delhi", "Delhi, India")), has_number(187)),
    ("flight-status", "is flight LH 454 on time today??",
     _TRAVEL, _e(get_flight_status, flight_number=("LH 454", "LH454")),
     all_of(any_of(says_any("delayed", "late", "not on time", "isn't on time"), begins_with_word("no")),
            says_none("not delayed", "isn't delayed", "not late", "no delay", "no delays", "is on time",
                      "on schedule", "no information", "no flight", "not found", "yes"))),
    ("search-flights", "Find flights from Oslo (OSL) to Rome (FCO) on 2025-06-12.",
     _TRAVEL, _e(search_flights, origin="OSL", destination="FCO", date="2025-06-12", passengers=(OMIT, 1)),
     says_any("SK4711", "FR2914", "AZ609", "SK 4711", "FR 2914", "AZ 609")),
    ("league-position", "Where does Arsenal currently stand in the Premier League table?",
     _FOOTBALL, _e(get_team_standing, team="Arsenal", league="premier_league"), says_any("2nd", "second")),
    ("player-goals", "how many league goals did erling haaland score in the 2022-23 season",
     _FOOTBALL, _e(get_player_stats, player=("Erling Haaland", "Haaland"), season="2022-23"), has_number(36)),
    ("open-positions", "Please list the open positions in the Engineering department.",
     _STAFF_TOOLS, _e(list_open_positions, department="engineering"),
     says_word("backend engineer", "data engineer")),
    ("file-size", "how big is /data/reports/q3.pdf ?",
     _FILE_TOOLS, _e(file_info, path="/data/reports/q3.pdf"),
     any_of(has_number(2481152), has_number(2.37, tolerance=0.01), has_number(2.48, tolerance=0.01))),
    ("molar-mass", "What is the molar mass of glucose, C6H12O6?",
     _CHEMISTRY, _e(molar_mass, formula="C6H12O6"), has_number(180.16, tolerance=0.01)),
    ("fever-celsius", "my thermometer says 101.3 F, whats that in celsius",
     _CONVERTERS, _e(convert_temperature, value=101.3, from_unit="fahrenheit", to_unit="celsius"),
     has_number(38.5, tolerance=0.05)),
    ("weekday-of-date", "On which day of the week did 14 July 1789 fall?",
     _DATES, _e(day_of_week, date="1789-07-14"), says_word("tuesday")),
)  # fmt: skip

_COUNTED = (OMIT, "", "pcs", "piece", "pieces", "whole", "egg", "eggs", "large")

_NESTED = _tasks(
    "nested",
    ("recipe-triple", "Scale this recipe by 3: 200 g flour, 2 eggs, 100 ml milk.",
     [scale_recipe], _e(scale_recipe, factor=3, ingredients=[
         {"name": "flour", "quantity": 200, "unit": "g"},
         {"name": ("eggs", "egg"), "quantity": 2, "unit": _COUNTED},
         {"name": "milk", "quantity": 100, "unit": "ml"}]),
     all_of(has_number(600), has_number(6), has_number(300))),
    ("shipping-address", "how much to ship a 2.5kg parcel to 10 Downing Street, London SW1A 2AA, UK? "
     "normal shipping is fine",
     [shipping_quote], _e(shipping_quote, weight_kg=2.5, service=(OMIT, "standard"), destination={
         "street": "10 Downing Street", "city": "London", "postal_code": "SW1A 2AA", "country": "GB"}),
     has_number(17.5)),
    ("average-list", "What is the average of 12, 45, 7, 88 and 23?",
     [mean], _e(mean, numbers=[12, 45, 7, 88, 23]), has_number(35)),
    ("product-filters", "looking for wireless headphones under 100 bucks, only stuff thats in stock, cheapest first",
     [search_products], _e(search_products, query=("wireless headphones", "headphones"), filters={
         "category": (OMIT, "audio"), "max_price": 100, "in_stock": True, "sort": "price_asc"}),
     says_word("soundcore")),
    ("calendar-invite", "Schedule a meeting titled 'Budget review' on April 8th 2025 at 2:30 pm for 45 minutes "
     "with ana@example.com and li@example.com.",
     [create_event], _e(create_event, title="Budget review", date="2025-04-08", start_time="14:30",
                        duration_minutes=45, attendees=["ana@example.com", "li@example.com"]),
     any_of(says_any("EV-89223", "89223"), says_any("created", "scheduled"))),
    ("matrix-determinant", "find the determinant of [[4, 3], [6, 8]]",
     [determinant], _e(determinant, matrix=[[4, 3], [6, 8]]), has_number(14)),
    ("staff-filters", "List the employees in the Sales department with at least 5 years of service who work "
     "remotely.",
     [search_staff], _e(search_staff, filters={"department": "sales", "min_years_of_service": 5, "remote": True}),
     says_word("ana lima", "dana roth")),
    ("split-bill", "we were 3 on the trip. anna paid 60, ben paid 15 and carl paid nothing. who owes who?",
     [settle_expenses], _e(settle_expenses, payments=[
         {"name": "Anna", "amount": 60}, {"name": "Ben", "amount": 15}, {"name": "Carl", "amount": 0}]),
     all_of(has_number(10), has_number(25))),
    ("route-stops", "Plan a driving route from Lyon to Geneva and then on to Turin. How long is it?",
     [plan_route], _e(plan_route, stops=["Lyon", "Geneva", "Turin"], mode=(OMIT, "driving")),
     any_of(has_number(413), has_number(5.2))),
    ("workout-log", "log today's workout: squats 5x5 at 100kg, bench press 3x8 at 60 kg. total volume?",
     [log_workout], _e(log_workout, exercises=[
         {"name": ("squats", "squat"), "sets": 5, "reps": 5, "weight_kg": 100},
         {"name": ("bench press", "bench"), "sets": 3, "reps": 8, "weight_kg": 60}]),
     has_number(3940)),
    ("meal-nutrition", "Give me the total calories and protein for 150 g of chicken breast and 200 g of cooked "
     "rice.",
     [nutrition_totals], _e(nutrition_totals, items=[
         {"food": "chicken_breast", "grams": 150}, {"food": "white_rice_cooked", "grams": 200}]),
     all_of(has_number(508), has_number(51.9, tolerance=0.05))),
    ("portfolio", "what's my portfolio worth? 10 shares of AAPL and 4 of MSFT",
     [portfolio_value],
     _e(portfolio_value, holdings=[{"symbol": "AAPL", "shares": 10}, {"symbol": "MSFT", "shares": 4}]),
     has_number(3936.24, tolerance=0.01)),
)  # fmt: skip

_IRRELEVANT = _tasks(
    "irrelevant",
    ("weather-with-stock-tools", "What's the weather in Tokyo today?",
     [get_stock_price, get_company_info], None, any_answer),
    ("flight-with-hotel-tool", "Book me a flight from Berlin to Madrid on May 2nd.",
     [search_hotels], None, any_answer),
    ("multiply-with-currency-tool", "what is 17 times 23", [convert_currency], None, any_answer),
    ("capital-with-weather-tool", "What is the capital of Australia?", [get_weather, get_air_quality], None,
     any_answer),
    ("translate-with-text-tools", "can you translate 'good morning' into spanish",
     [slugify, count_words], None, any_answer),
    ("email-with-calendar-tool", "Send an email to my landlord saying that the rent has been paid.",
     [create_event], None, any_answer),
    ("author-with-music-tools", "who wrote pride and prejudice?", [search_songs, get_track_details], None, any_answer),
    ("temperature-with-length-tools", "Convert 100 degrees Fahrenheit to Celsius.",
     [convert_length, convert_cooking_measure], None, any_answer),
    ("alarm-with-date-tools", "set an alarm for 6:30 tomorrow morning pls", [days_between, get_weather], None,
     any_answer),
    ("balance-with-finance-tools", "What is the current balance of my checking account?",
     [compound_interest, convert_currency], None, any_answer),
    ("pizza-with-recipe-tools", "order a large pepperoni pizza to my place",
     [scale_recipe, nutrition_totals], None, any_answer),
    ("square-root-with-area-tool", "What is the square root of 144?", [calculate_triangle_area], None, any_answer),
    ("delete-with-file-tools", "Delete the file /data/reports/q3.pdf.", [file_info, list_directory], None, any_answer),
    ("play-jazz-with-tempo-tool", "play some jazz", [bpm_to_ms], None, any_answer),
    ("headcount-with-openings-tool", "How many people work at our company in total?",
     [list_open_positions], None, any_answer),
    ("restaurant-with-travel-tools", "reserve a table for two at an italian restaurant tonight, around 8",
     [search_hotels, get_weather], None, any_answer),
    ("haiku-with-counter", "Write a haiku about autumn.", [count_words], None, any_answer),
    ("boiling-point-with-chemistry", "What is the boiling point of water at sea level, in Celsius?",
     [molar_mass, element_info], None, any_answer),
    ("gym-cancel-with-fitness-tools", "hi! could you cancel my gym membership? thanks",
     [calories_burned, log_workout], None, any_answer),
    ("world-cup-with-league-tools", "Who won the 2018 FIFA World Cup?",
     [get_team_standing, get_player_stats], None, any_answer),
)  # fmt: skip

_MULTI = _tasks(
    "multi",
    ("order-total", "What was the total of the most recent order placed by maria.lopez@example.com?",
     [lookup_orders, get_order], _e(lookup_orders, customer_email="maria.lopez@example.com"), has_number(317.45),
     _e(get_order, order_id=48213)),
    ("porto-timezone", "which time zone is porto, portugal in?",
     [geocode, get_timezone], _e(geocode, city=("Porto", "Porto, Portugal")),
     says_any("europe/lisbon", "wet", "western european"),
     _e(get_timezone, latitude=41.1579, longitude=-8.6291)),
    ("jacket-with-vat", "I'm buying a jacket priced at 120 USD from a German shop. What does it cost in euros with "
     "German VAT added?",
     [convert_currency, add_vat], _e(convert_currency, amount=120, from_currency="USD", to_currency="EUR"),
     has_number(131.38, tolerance=0.01), _e(add_vat, amount=110.4, country="DE")),
    ("manager-email", "What is the email address of Priya Raman's manager?",
     [find_employee, get_manager, get_contact], _e(find_employee, name="Priya Raman"),
     says_word("t.ortega@corp.example"),
     _e(get_manager, employee_id="E-20931"), _e(get_contact, employee_id="E-11802")),
    ("song-tempo", "whats the bpm of blinding lights by the weeknd",
     [search_songs, get_track_details],
     _e(search_songs, title=("Blinding Lights", "Blinding Lights The Weeknd", "Blinding Lights - The Weeknd",
                             "Blinding Lights by The Weeknd")),
     has_number(171), _e(get_track_details, track_id=77104)),
    ("postcode-weather", "hey whats the weather at postcode 9008 in norway rn",
     [lookup_postcode, get_weather], _e(lookup_postcode, postcode="9008", country="NO"), has_number(-7),
     _e(get_weather, city=("Tromsø", "Tromso", "Tromsø, Norway"), unit=(OMIT, "celsius"))),
    ("share-in-euros", "What is one NVDA share worth in euros right now?",
     [get_stock_price, convert_currency, get_company_info], _e(get_stock_price, symbol="NVDA"),
     has_number(120.86, tolerance=0.01), _e(convert_currency, amount=131.38, from_currency="USD", to_currency="EUR")),
    ("glucose-moles", "How many moles are there in 50 g of glucose (C6H12O6)?",
     _CHEMISTRY, _e(molar_mass, formula="C6H12O6"), has_number(0.2775, tolerance=0.0005),
     _e(grams_to_moles, grams=50, molar_mass=(180.156, 180.16))),
    ("cheapest-flight-gate", "Find the cheapest flight from OSL to FCO on 2025-06-12 and tell me which gate it "
     "leaves from.",
     _TRAVEL, _e(search_flights, origin="OSL", destination="FCO", date="2025-06-12", passengers=(OMIT, 1)),
     says_word("c14"), _e(get_flight_status, flight_number=("FR2914", "FR 2914"))),
    ("next-opponent", "who do arsenal play next in the premier league?",
     _FOOTBALL, _e(get_team_standing, team="Arsenal", league="premier_league"), says_word("brentford"),
     _e(get_match, match_id=90317)),
    ("shortbread-butter", "How much butter do I need to make the shortbread recipe for 12 people?",
     [find_recipe, get_recipe], _e(find_recipe, name=("shortbread", "Scottish shortbread", "shortbread recipe")),
     has_number(342), _e(get_recipe, recipe_id="R-5512", servings=12)),
    ("file-modified", "when was q3-final.pdf last modified? it's somewhere under /data",
     [find_files, file_info, list_directory], _e(find_files, name="q3-final.pdf", root=("/data", "/data/")),
     says_any("2024-10-03", "october 3", "3 october", "oct 3", "october 3rd"),
     _e(file_info, path="/data/reports/2024/q3-final.pdf")),
    ("hotel-cancellation", "Find hotels in Kyoto for 2 nights from 14 March 2025 and tell me the cancellation "
     "policy of the cheapest one.",
     [search_hotels, get_hotel_details, search_flights],
     _e(search_hotels, city="Kyoto", check_in="2025-03-14", nights=2, guests=(OMIT, 2)), has_number(72),
     _e(get_hotel_details, hotel_id="H-8830")),
    ("leave-days", "how many vacation days does jonas berg have left? he asked me to check",
     _STAFF_TOOLS, _e(find_employee, name="Jonas Berg"), has_number(17.5),
     _e(get_leave_balance, employee_id="E-30418")),
    ("straight-line-distance", "What is the straight-line distance between Quito and Guayaquil, in kilometres?",
     [geocode, geo_distance], _e(geocode, city=("Quito", "Quito, Ecuador", "Guayaquil", "Guayaquil, Ecuador")),
     has_number(274.1, tolerance=1.0),
     _e(geocode, city=("Guayaquil", "Guayaquil, Ecuador")),
     _e(geo_distance, lat1=-0.1807, lon1=-78.4678, lat2=-2.171, lon2=-79.9224)),
    ("latest-post-title", "What's the title of the most recent post by @kestrel_dev?",
     [user_lookup, user_posts], _e(user_lookup, username=("kestrel_dev", "@kestrel_dev")),
     says_word("profiling asyncio without tears"), _e(user_posts, user_id=5521904, limit=(OMIT, 1, 10))),
)  # fmt: skip

CALL_TASKS: tuple[CallTask, ...] = (*_CALL, *_CHOOSE, *_NESTED, *_IRRELEVANT, *_MULTI)
