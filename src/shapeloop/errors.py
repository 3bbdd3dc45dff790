"""Every exception shapeloop raises.

The model's mistakes (a bad shape, a bad argument, a failing tool) are not exceptions: they become
text the model reads on its next step. These are the caller's and the machine's mistakes::

    ShapeloopError
    ├── BackendError            a backend could not produce a reply
    │   ├── SchemaRefused       the backend will not constrain to this schema (the run goes to prose)
    │   ├── ContextOverflow     the prompt does not fit the model's context window
    │   ├── BackendUnavailable  the server or model cannot be reached (says how to fix it)
    │   └── BackendTimeout      the server took longer than the timeout to answer
    ├── UsageError              options or arguments that cannot work together (says which)
    ├── ToolFailure             raised inside a tool; the loop turns it into ``ERROR: ...``
    │   └── ToolRefusal         raised inside a tool that will not do what it is asked: ``DENIED: ...``
    │       └── OutsideWorkspace  a path that would leave the workspace
    ├── TimedOut                a tool or model call ran past its time limit (the loop turns it into feedback or a stop)
    ├── TranscriptError         a transcript path that cannot be written (found before the run)
    ├── ServerUnavailable       an MCP server that could not start or be reached (found before the run)
    └── CatalogueError          the model catalogue or its cache
        ├── UnknownModel        a name that is neither in the catalogue nor a GGUF file
        └── ChecksumMismatch    an assembled model whose sha256 is not the pinned one
"""

from __future__ import annotations


class ShapeloopError(Exception):
    """Base of every shapeloop exception."""


class BackendError(ShapeloopError):
    """A backend failed to produce a reply.

    Attributes:
        backend: short name of the backend that failed (``"llamacpp"``, ``"ollama"``...).
    """

    def __init__(self, message: str, *, backend: str = "") -> None:
        super().__init__(message)
        self.backend = backend


class SchemaRefused(BackendError):
    """The backend refuses to constrain output to the given JSON schema.

    The loop catches this, switches the run to prose mode and asks again without spending a step.
    """


class ContextOverflow(BackendError):
    """The prompt does not fit the context window.

    Attributes:
        prompt_tokens: tokens the prompt needs.
        context_window: tokens the window holds.
    """

    def __init__(self, message: str, *, prompt_tokens: int, context_window: int, backend: str = "") -> None:
        super().__init__(message, backend=backend)
        self.prompt_tokens = prompt_tokens
        self.context_window = context_window

    @property
    def overflow(self) -> int:
        """How many tokens too many."""
        return self.prompt_tokens - self.context_window


class BackendUnavailable(BackendError):
    """The server or the model cannot be reached; the message says what to run."""


class UsageError(ShapeloopError):
    """A combination of options or arguments that cannot work; the message says which to change."""


class BackendTimeout(BackendError):
    """The backend did not answer within its timeout; the message names the timeout."""


class ToolFailure(ShapeloopError):
    """Raised by a tool to report a failure; the model sees ``ERROR: <message>``."""


class ToolRefusal(ToolFailure):
    """Raised by a tool that will not do what it is asked, whatever the arguments (a path outside its
    workspace): the model sees ``DENIED: <message>``. Unlike an error, a refusal is not the model's
    mistake to fix, and an answer may pass it on to the user ("that file is outside the workspace")."""


class OutsideWorkspace(ToolRefusal):
    """A path that resolves outside the workspace root."""


class TimedOut(ShapeloopError):
    """A call ran past its time limit; its thread runs on in the background, its result dropped."""


class TranscriptError(ShapeloopError):
    """A transcript path that cannot be written: a folder, a symlink, a missing or read-only folder."""


class ServerUnavailable(ShapeloopError):
    """An MCP server that could not be started or reached; ``mcp_tools`` raises it before any run.

    Attributes:
        server: the server's name in messages.
        log_path: the file that holds the server's stderr (stdio servers), or None.
    """

    def __init__(self, message: str, *, server: str, log_path: str | None = None) -> None:
        super().__init__(message)
        self.server = server
        self.log_path = log_path


class CatalogueError(ShapeloopError):
    """A problem with the model catalogue or its local cache."""


class UnknownModel(CatalogueError):
    """A model name that is neither in the catalogue nor a path to a GGUF file."""


class ChecksumMismatch(CatalogueError):
    """An assembled model file whose sha256 differs from the pinned one."""

    def __init__(self, message: str, *, expected: str, actual: str) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual
