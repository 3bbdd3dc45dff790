"""Options kept for one release after they stopped doing anything: each warns where it is given."""

from __future__ import annotations

import warnings
from typing import Any


def warn_no_effect(why: str, *, stacklevel: int, prefix: str = "", **given: Any) -> None:
    """Warn (``DeprecationWarning``) for each option in ``given`` that is not None: it has no effect
    and will be removed, because ``why``. ``stacklevel`` counts from the caller of this function, as
    :func:`warnings.warn` counts from its own caller; ``prefix`` names what took the option
    (``run_agent(``)."""
    for name, value in given.items():
        if value is not None:
            warnings.warn(
                f"{prefix}{name}=...{')' if prefix else ''} has no effect and will be removed: {why}",
                DeprecationWarning,
                stacklevel=stacklevel + 1,
            )
