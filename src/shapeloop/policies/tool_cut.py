"""ToolCut: where the offered tools' documentation would take too much of the model's window, each
step offers (and documents) only the tools closest to the request.

Issue 47, item 5: MCP servers bring dozens of tools, and a small model in a 4k-8k window cannot read
them all (open-webui users saw tools stop being called past three MCP tools). This policy estimates
the tokens the tools' documentation takes (three characters a token: on six real servers' tools it
reads about 30% below the prompt's real tokens, which also render each tool's schema, so the cut
applies later than ``share`` says); over ``share`` of ``window`` it ranks the tools against the
request with LookupHint's ranking (character n-grams weighted by how rare they are among the tools:
no word list of any language) and offers the best ``keep``, and every tool the run has called
already (so a call the model makes next can be the one it made before). Each shaped step is a
:class:`~shapeloop.events.PolicyIntervened` event that names the tools kept.

Measured (``benchmarks/mcp_tools.py``, ``measurements/mcp_tools/``; docs/mcp.md): 16 requests among
40 MCP tools in a 4 096-token window, the first call judged. qwen2.5-coder-0.5b: the right tool on
11 of 16 with the cut against 9 of 16 without (gained 4, lost 2), a third of the seconds;
qwen2.5-coder-1.5b: 13 against 12 (gained 2, lost 1), 37 seconds a request against 123. It stays
opt-in: where a task's later steps need tools far from its words (BFCL's multi-turn entries), a cut
of this kind lost (the deleted ``tool-ranking``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from shapeloop.policies.base import Policy, RunView, StepShape
from shapeloop.policies.lookup import Ranker
from shapeloop.tooldoc import render_tools
from shapeloop.tools import Tool

CHARS_PER_TOKEN = 3  # of a tool's documentation, estimated on the high side


def documentation_tokens(tools: Sequence[Tool]) -> int:
    """The tokens the tools' documentation takes in the system prompt, estimated on the high side."""
    return len(render_tools(tools, "outline")) // CHARS_PER_TOKEN if tools else 0


class ToolCut(Policy):
    """Offer only the ``keep`` tools closest to the request where the documentation of all of them
    takes more than ``share`` of ``window`` tokens.

    Args:
        window: the model's context window in tokens.
        share: the part of the window the tools' documentation may take before the cut (0 to 1).
        keep: how many tools a step offers once the cut applies (tools called already are added).
    """

    def __init__(self, *, window: int = 8192, share: float = 0.4, keep: int = 8) -> None:
        if not isinstance(window, int) or isinstance(window, bool) or window < 256:
            raise ValueError(f"window must be a whole number of tokens, 256 or more, not {window!r}")
        if not 0 < share <= 1:
            raise ValueError(f"share must be more than 0 and at most 1, not {share!r}")
        if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
            raise ValueError(f"keep must be a whole number, 1 or more, not {keep!r}")
        self.window, self.share, self.keep = window, share, keep
        self._ranker: Ranker | None = None
        self._taken = 0

    def for_run(self, task: str, tools: Sequence[Tool]) -> ToolCut:
        """A fresh copy that knows whether the run's tools are over the share, and ranks them if so."""
        del task
        fresh = copy.copy(self)
        fresh._taken = documentation_tokens(tools)
        over = fresh._taken > self.share * self.window and len(tools) > self.keep
        fresh._ranker = Ranker(tools) if over else None
        return fresh

    def shape_step(self, view: RunView) -> StepShape | None:
        """Offer the ``keep`` tools that rank best against the request, and those already called."""
        if self._ranker is None:
            return None
        scores = self._ranker.scores([view.task])
        ranked = sorted(view.tools, key=lambda tool: -scores.get(tool.name, 0.0))  # stable: ties keep their order
        kept = [tool.name for tool in ranked[: self.keep]]
        offered = {tool.name for tool in view.tools}
        called = dict.fromkeys(outcome.call.tool for outcome in view.calls)
        kept += [name for name in called if name in offered and name not in kept]
        reason = (
            f"the {len(view.tools)} tools' documentation takes about {self._taken} tokens, over "
            f"{self.share:.0%} of the {self.window}-token window: offered the {len(kept)} closest to the request "
            f"({', '.join(kept)})"
        )
        return StepShape(reason=reason, tools=frozenset(kept))
