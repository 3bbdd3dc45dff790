"""The README is what a newcomer meets: short, its commands the ones CI runs, its links alive.

Its Python example needs a model, so ``tests/test_docs.py`` compiles it and checks every shapeloop
name it imports; the docs pages hold the examples that run.
"""

import re
from pathlib import Path

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
    for model in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"):
        assert re.search(rf"^\| {re.escape(model)} \| raw \(one call, no loop\) \| \d+%", table, re.M), model
        # the default preset is the plain loop while no policy has earned a place: one row says both
        assert re.search(rf"^\| {re.escape(model)} \| plain loop = default preset \(`policies=\(\)`\) \| \d+%",
                         table, re.M), model  # fmt: skip
    assert "| Qwen2.5-0.5B-Instruct | prompt, full precision, BFCL v3 | 53.9 | 34.8 | 16.4 | 0.0 |" in table
    assert "58.0 | 73.9" in table  # Hammer2.1-0.5b, a model fine-tuned for function calling
    assert "pending" not in table
