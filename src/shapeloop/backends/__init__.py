"""The backend registry: one name per backend, open to other packages.

The built-in backends are ``llamacpp`` (the default), ``ollama``, ``openai`` and ``instructor``. A
package adds its own under the ``shapeloop.backends`` entry-point group, naming a factory::

    # pyproject.toml of the package "shapeloop-echo"
    [project.entry-points."shapeloop.backends"]
    echo = "shapeloop_echo:make_brain"

A factory is called as ``factory(model, base_url=..., context=..., progress=..., **options)`` and
returns a :class:`~shapeloop.Brain`; it should accept and ignore keywords it has no use for.
``model`` and ``base_url`` may be None; ``context`` is the context window in tokens (None: the
backend's default); ``progress`` takes a line of text to show while the backend gets ready.
``shapeloop run --backend echo`` and :func:`create` find it.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any

from shapeloop import models
from shapeloop.brain import Brain
from shapeloop.errors import UsageError

ENTRY_POINT_GROUP = "shapeloop.backends"
DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"

Factory = Callable[..., Brain]


def _llamacpp(model: str | None, *, base_url: str | None = None, context: int | None = None,
              progress: Callable[[str], None] | None = None, **options: Any) -> Brain:  # fmt: skip
    from shapeloop.backends.llamacpp import LlamaCppBrain

    if base_url is not None:
        raise UsageError("the llamacpp backend runs in this process and takes no base URL: drop --base-url")
    name = model or models.DEFAULT_MODEL
    if progress is not None and name in models.CATALOGUE and not models.is_pulled(name):
        progress(f"model {name} is not pulled yet: pulling it now ({models.lookup(name).size / 1e6:.0f} MB, once)")
    options.setdefault("pull", True)
    return LlamaCppBrain(name, n_ctx=context or 8192, progress=progress, **options)


def _ollama(model: str | None, *, base_url: str | None = None, context: int | None = None, **options: Any) -> Brain:
    from shapeloop.backends.ollama import OllamaBrain

    options.pop("progress", None)
    return OllamaBrain(_needed(model, "ollama"), host=base_url, num_ctx=context or 8192, **options)


def _openai(model: str | None, *, base_url: str | None = None, context: int | None = None, **options: Any) -> Brain:
    from shapeloop.backends.openai import OpenAIBrain

    options.pop("progress", None)
    return OpenAIBrain(_needed(model, "openai"), base_url=base_url or DEFAULT_BASE_URL, **options)


def _instructor(model: str | None, *, base_url: str | None = None, context: int | None = None,
                **options: Any) -> Brain:  # fmt: skip
    from shapeloop.backends.instructor import InstructorBrain

    options.pop("progress", None)
    return InstructorBrain(_needed(model, "instructor"), base_url=base_url or DEFAULT_BASE_URL, **options)


def _needed(model: str | None, backend: str) -> str:
    if not model:
        raise UsageError(f"the {backend} backend needs a model (--model): the name of a model the server has")
    return model


BUILTIN: dict[str, Factory] = {"llamacpp": _llamacpp, "ollama": _ollama, "openai": _openai, "instructor": _instructor}


def names() -> list[str]:
    """The built-in backends, then those that installed packages register, in name order."""
    plugged = sorted(ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    return [*BUILTIN, *(name for name in plugged if name not in BUILTIN)]


def factory(name: str) -> Factory:
    """The factory registered as ``name`` (a built-in name cannot be taken over by a package).

    Raises:
        UsageError: no backend has that name (the message lists those that do), or its package's
            module cannot be imported.
    """
    if name in BUILTIN:
        return BUILTIN[name]
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=name):
        try:
            loaded = entry.load()
        except ImportError as exc:
            raise UsageError(f"backend {name!r} ({entry.value}) could not be imported: {exc}") from exc
        if not callable(loaded):
            raise UsageError(f"backend {name!r} ({entry.value}) is not a callable factory")
        return loaded  # type: ignore[no-any-return]
    raise UsageError(
        f"no backend named {name!r}; the backends are: {', '.join(names())}. A package adds one under "
        f"the {ENTRY_POINT_GROUP!r} entry-point group"
    )


def create(name: str, model: str | None = None, *, base_url: str | None = None, **options: Any) -> Brain:
    """Make a brain on the backend registered as ``name``.

    Args:
        name: ``llamacpp``, ``ollama``, ``openai``, ``instructor``, or a name a package registers.
        model: the model (a catalogue name or GGUF path for ``llamacpp``, the server's model name
            for the others); ``llamacpp`` defaults to the catalogue's default model.
        base_url: the server, for backends that talk to one.
        options: passed to the factory (``context=`` the context window, ``progress=``, or the
            backend class's own keywords).

    Raises:
        UsageError: an unknown name, a missing model, or a factory that does not return a brain.
    """
    brain = factory(name)(model, base_url=base_url, **options)
    if not isinstance(brain, Brain):
        raise UsageError(
            f"backend {name!r} returned {type(brain).__name__}, which is not a Brain: it needs capabilities, "
            "ask(request) and close()"
        )
    return brain
