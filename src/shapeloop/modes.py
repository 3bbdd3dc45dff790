"""How a run asks for its steps and why it ends: :class:`Mode`, :func:`choose_mode` and
:class:`StopReason`.

The words the events, the run's record and the loop share; they live below all three, so that
each imports them and none imports another back. ``shapeloop.run`` re-exports them.
"""

from __future__ import annotations

import enum

from shapeloop.brain import Capabilities, SchemaSupport


class Mode(enum.StrEnum):
    """How the run asked the model for steps."""

    CONSTRAINED = "constrained"
    """The step schema was enforced by the backend (a grammar or ``format``)."""
    PROSE = "prose"
    """The backend refused the schema; the step was read out of a prose reply."""
    NATIVE = "native"
    """The backend's own tool-calling API carried the calls."""


class StopReason(enum.StrEnum):
    """Why a run ended."""

    ANSWERED = "answered"
    MAX_STEPS = "max_steps"
    STUCK = "stuck"
    BARREN = "barren"
    BACKEND_ERROR = "backend_error"
    BUDGET = "budget"
    INTERRUPTED = "interrupted"
    ERROR = "error"
    """The run raised (a failing tool acceptor, a brain's untranslated error); ``run_many`` keeps it
    as this stop, the exception in ``reason``, rather than losing the batch."""


def choose_mode(wanted: Mode, capabilities: Capabilities) -> tuple[Mode, str]:
    """The mode a run starts in: the one wanted, or the nearest below it that the brain declares.

    Returns the mode and, when it is not the one wanted, the reason (else an empty string).
    """
    mode, reason = wanted, ""
    if mode is Mode.NATIVE and not capabilities.native_tools:
        mode, reason = Mode.CONSTRAINED, "the backend has no native tool calls"
    if mode is Mode.CONSTRAINED and capabilities.schema is SchemaSupport.NONE:
        mode, reason = Mode.PROSE, "the backend cannot constrain a reply to a schema"
    return mode, reason
