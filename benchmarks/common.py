"""What every benchmark writes beside its figures: when, where, with what."""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
from pathlib import Path
from typing import Any

import shapeloop
from shapeloop import Brain, models

MEASUREMENTS = Path(__file__).resolve().parent.parent / "measurements"


def make_brain(backend: str, model: str, base_url: str | None, context: int, threads: int | None = None) -> Brain:
    """The model on the chosen backend: the embedded one with a window of ``context`` tokens and
    ``threads`` CPU threads (all cores when None), or a server's, which keeps its own window."""
    from shapeloop import backends

    if backend == "llamacpp":
        return backends.create(backend, model, base_url=base_url, context=context,
                               **({"n_threads": threads} if threads else {}))  # fmt: skip
    return backends.create(backend, model, base_url=base_url, context=None)


def machine() -> dict[str, Any]:
    """Cores and processor of this machine."""
    processor = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            processor = next(
                (line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), processor
            )
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "processor": processor,
        "system": platform.platform(),
        "python": platform.python_version(),
    }


def model_info(name: str) -> dict[str, Any]:
    """Name, file and pinned sha256 of a catalogue model (just the name for a server's model)."""
    if name not in models.CATALOGUE:
        return {"name": name}
    entry = models.lookup(name)
    return {"name": name, "title": entry.title, "file": str(models.cached_path(name)), "sha256": entry.sha256}


def median(values: list[float]) -> float | None:
    """The median, or None when there are no values."""
    return float(statistics.median(values)) if values else None


def write(name: str, payload: dict[str, Any], folder: Path = MEASUREMENTS) -> Path:
    """Write ``<folder>/<name>.json`` (``measurements/`` by default) with the date and versions added."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    record = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "shapeloop": shapeloop.__version__,
        "machine": machine(),
        **payload,
    }
    scratch = path.with_name(f".{path.name}.part")  # whole, then in place: never a torn file
    scratch.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(scratch, path)
    return path
