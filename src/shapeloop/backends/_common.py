"""What the backends share: the error-mapping boundary, bounded backoff on 429 / 503, and reading
native call arguments."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from shapeloop.errors import BackendError

T = TypeVar("T")
RETRY_STATUSES = frozenset({429, 503})

ErrorTable = Sequence[tuple[type[BaseException], type[BackendError], str]]
"""Rows of (the library's exception type, ours, a message template); the first row whose type
matches wins, so specific types come before their bases. Templates may use ``{exc}`` and the
facts given to :func:`mapped_errors`."""


@contextmanager
def mapped_errors(table: ErrorTable, *, backend: str, **facts: Any) -> Iterator[None]:
    """Translate the library's exceptions into ours by type, at the backend's one boundary.

    Our own errors pass through; an exception no row names (a programming error) propagates as it is.
    """
    try:
        yield
    except BackendError:
        raise
    except tuple(row[0] for row in table) as exc:
        _, ours, message = next(row for row in table if isinstance(exc, row[0]))
        raise ours(message.format(exc=exc, **facts), backend=backend) from exc


def with_backoff(
    call: Callable[[], T],
    *,
    status_of: Callable[[Exception], int | None],
    attempts: int = 5,
    base_delay: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``call``; on a 429 or 503 wait ``base_delay * 2**n`` and try again, ``attempts`` times in all.

    Args:
        call: the request.
        status_of: the HTTP status an exception carries, or None for errors not to retry.
        attempts: tries in all, the first included.
        base_delay: the first wait, in seconds.
        sleep: how to wait (tests pass a recorder).
    """
    for attempt in range(attempts):
        try:
            return call()
        except Exception as exc:
            if status_of(exc) not in RETRY_STATUSES or attempt == attempts - 1:
                raise
            sleep(base_delay * 2**attempt)
    raise AssertionError("unreachable")  # pragma: no cover


def parse_arguments(raw: Any) -> dict[str, Any]:
    """A native call's arguments (a JSON string or an object) as a dict; unreadable text is kept."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw or "{}")
        except (ValueError, RecursionError):  # RecursionError: thousands of nested brackets
            return {"_unparsed": raw}
    return dict(raw) if isinstance(raw, dict) else {"_unparsed": raw}
