"""The README is what a newcomer meets: short, its commands the ones CI runs, its links alive.

Its Python example needs a model, so ``tests/test_docs.py`` compiles it and checks every shapeloop
name it imports; the docs pages hold the examples that run.
"""

import re
from pathlib import Path

from shapeloop.models import CATALOGUE

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_the_readme_fits_a_few_screens() -> None:
    assert len(README.splitlines()) < 250


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    assert "python -m pytest" in README and "python -m pytest" in (ROOT / ".ci" / "run").read_text()


def test_every_relative_link_of_the_readme_leads_to_a_file() -> None:
    links = [target for target in re.findall(r"\]\(([^)#\s]+)", README) if "://" not in target]
    assert links, "the README links to the docs"
    missing = [target for target in links if not (ROOT / target).exists()]
    assert not missing, f"the README links to files that do not exist: {missing}"


def test_every_docs_page_is_in_the_readme_map() -> None:
    pages = {str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")} - {"docs/index.md"}
    assert pages <= set(re.findall(r"\]\((docs/[\w-]+\.md)\)", README))


def test_the_headline_table_has_a_row_for_each_model_and_column_and_the_published_anchors() -> None:
    table = README[README.index("## How it does") :]
    # one raw call is the baseline for both models, on the report sample and on the tune one
    for model in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"):
        assert re.search(rf"^\| {re.escape(model)} \| raw \(one call, no loop\) \| \d+%", table, re.M), model
        assert re.search(rf"^\| {re.escape(model)} \| raw \(one call, no loop\) \| tune \| \d+%", table, re.M), model
        # a model with no preset: its default is the plain loop, and one row says both; a model with
        # one: a row for the plain loop and a row for its default, which names the preset
        preset = CATALOGUE[model].preset
        rows = ([r"plain loop \(`policies=\(\)`\)", rf"default: its preset \({re.escape(_named(preset))}\)"]
                if preset else [r"plain loop = default preset \(`policies=\(\)`\)"])  # fmt: skip
        for row in rows:
            assert re.search(rf"^\| {re.escape(model)} \| {row} \| \d+%", table, re.M), (model, row)
    assert "| Qwen2.5-0.5B-Instruct | prompt, full precision, BFCL v3 | 53.9 | 34.8 | 16.4 | 0.0 |" in table
    assert "58.0 | 73.9" in table  # Hammer2.1-0.5b, a model fine-tuned for function calling
    assert "pending" not in table


def _named(preset: tuple[str, ...]) -> str:
    """A preset as the README's rows name it: ``abstain`` in backquotes, several joined by ", "."""
    return ", ".join(f"`{name}`" for name in preset)


def _rows(section: str) -> list[dict[str, str]]:
    """Every row of every Markdown table in ``section``, as a dict from its table's header."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in section.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif not set("".join(cells)) <= set("-: "):
            rows.append(dict(zip(header, cells, strict=True)))
    return rows


def test_the_headline_figures_are_the_ones_measured() -> None:
    """Each BFCL figure the README gives (right of items, per model, column and category) is the one in
    ``measurements/bfcl.json``, for the sample the category or the entries belong to."""
    import json

    summaries = json.loads((ROOT / "measurements" / "bfcl.json").read_text())["summaries"]
    report = {"simple_python", "multiple", "irrelevance", "live_simple"}
    columns = {"raw (one call, no loop)": "raw", "plain loop = default preset (`policies=()`)": "plain",
               "raw (one call a turn, no results seen)": "raw", "plain loop = default preset": "plain",
               "plain loop + `lookup-hint` (opt-in)": "lookup-hint",
               "five-field step (`batch=False`)": "five-field", "plain loop (`policies=()`)": "plain",
               "plain loop": "plain"}  # fmt: skip
    # a model's default with a preset: the default column on the report sample, the preset's own
    # column on tune (the policies' ablation ran it there)
    presets = {f"default: its preset ({_named(m.preset)})": m.preset for m in CATALOGUE.values() if m.preset}

    def measured(model: str, column: str, split: str, category: str, key: str = "right") -> tuple[int, int]:
        (found,) = [s for s in summaries if (s["model"], s["column"], s["split"], s["category"])
                    == (model, column, split, category)]  # fmt: skip
        return found[key], found["items"] if key == "right" else found["turns_total"]

    def fraction(cell: str) -> tuple[int, int]:
        right, items = re.search(r"(\d+)/(\d+)", cell).groups()  # type: ignore[union-attr]
        return int(right), int(items)

    section = README[README.index("## How it does") : README.index("## Documentation")]
    checked = 0
    for row in _rows(section):
        model, label = row.get("model"), row.get("column", "")
        report_rows = row.get("entries", "").startswith("0-") or ("sample" not in row and "entries" not in row)
        column = columns.get(label) or (("default" if report_rows else ",".join(presets[label]))
                                        if label in presets else None)  # fmt: skip
        if not model or not column:
            continue
        if "entries" in row:  # multi-turn: "0-19" is the report sample, "100-119" the tune one
            split = "report" if row["entries"].startswith("0-") else "tune"
            verdict = row["entries right (BFCL's verdict)"]
            assert fraction(verdict) == measured(model, column, split, "multi_turn_base"), row
            state = row["turns whose state matches the truth"]
            assert fraction(state) == measured(model, column, split, "multi_turn_base", "turns_state"), row
            checked += 2
            continue
        categories = {name: name.replace(" ", "_") for name in row if name.replace(" ", "_") in report
                      or name.startswith(("live ", "parallel"))}  # fmt: skip
        total = [0, 0]
        for name, category in categories.items():  # a table that names its sample (the screen) is of that one
            split = row.get("sample") or ("report" if category in report else "tune")
            right, items = measured(model, column, split, category)
            assert fraction(row[name]) == (right, items), (model, column, name)
            total = [total[0] + right, total[1] + items]
            checked += 1
        if "all single-turn" in row:
            assert fraction(row["all single-turn"]) == tuple(total), (model, column)
    assert checked >= 40, "the README's BFCL tables were not found"
