"""The pin behind the embedded backend's one adapter to llama-cpp-python's private attributes."""

import inspect
import re
from pathlib import Path

import pytest

from shapeloop.backends._llama import PINNED_VERSION

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
CHECK_AGAIN = (
    "backends/_llama.py was read against llama-cpp-python {pinned}: check its private attributes "
    "(Llama._model.vocab, Llama._model.token_get_text, Llama._ctx.get_logits) against {found}, then move "
    "PINNED_VERSION and the pin in pyproject.toml together"
)


def test_the_dependency_pin_is_the_version_the_adapter_was_read_from() -> None:
    pinned = re.search(r'"llama-cpp-python==([^"]+)"', PYPROJECT.read_text())
    assert pinned is not None, "pyproject.toml no longer pins llama-cpp-python exactly"
    assert pinned.group(1) == PINNED_VERSION, CHECK_AGAIN.format(pinned=PINNED_VERSION, found=pinned.group(1))


def test_the_installed_version_is_the_pinned_one_and_has_the_private_attributes() -> None:
    llama_cpp = pytest.importorskip(
        "llama_cpp", reason="llama-cpp-python is not installed (pip install '.[local]'): the pin cannot be checked"
    )
    from llama_cpp import _internals

    assert llama_cpp.__version__ == PINNED_VERSION, CHECK_AGAIN.format(
        pinned=PINNED_VERSION, found=llama_cpp.__version__
    )
    setup = inspect.getsource(llama_cpp.Llama.__init__)
    assert "self._model =" in setup and "self._ctx =" in setup
    assert "self.vocab =" in inspect.getsource(_internals.LlamaModel.__init__)
    assert callable(_internals.LlamaModel.token_get_text) and callable(_internals.LlamaContext.get_logits)
