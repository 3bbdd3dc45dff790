"""A brain that routes between backends: a small local model first, a larger one once the run
starts going round in circles."""

from __future__ import annotations

from shapeloop.brain import BaseBrain, Brain, Capabilities, Reply, Request, SchemaSupport


class RouterBrain(BaseBrain):
    """Asks ``primary`` until the run has repeated itself ``escalate_after`` times, then ``fallback``.

    The loop counts a repeat as soon as a call or a barren reply repeats, before its ``stuck_limit``
    stops the run, and sends the count in every request (:attr:`Request.repeats`), so the larger
    model gets the turn that can still finish the work. The router keeps no state: each run starts
    on ``primary``. Keep ``stuck_limit`` above ``escalate_after``.

    Args:
        primary: the brain asked first (say a local model).
        fallback: the brain asked after escalating (say a larger or remote one).
        escalate_after: repeats noticed before escalating.
    """

    def __init__(self, primary: Brain, fallback: Brain, *, escalate_after: int = 1) -> None:
        if escalate_after < 1:
            raise ValueError("escalate_after must be at least 1")
        self.primary = primary
        self.fallback = fallback
        self.escalate_after = escalate_after
        self.capabilities = _shared(primary.capabilities, fallback.capabilities)

    @property
    def members(self) -> tuple[Brain, Brain]:
        """The two brains it routes between (``run_many`` locks each exclusive one on its own)."""
        return (self.primary, self.fallback)

    def route(self, request: Request) -> Brain:
        """The brain that answers ``request``."""
        return self.fallback if request.repeats >= self.escalate_after else self.primary

    def ask(self, request: Request) -> Reply:
        """Ask the brain the request is routed to."""
        return self.route(request).ask(request)

    def close(self) -> None:
        """Close both brains."""
        try:
            self.primary.close()
        finally:
            self.fallback.close()


def _shared(first: Capabilities, second: Capabilities) -> Capabilities:
    """What both brains can do, since either may answer."""
    order = [SchemaSupport.NONE, SchemaSupport.FLAT, SchemaSupport.FULL]
    schema = min(first.schema, second.schema, key=order.index)
    return Capabilities(
        schema=schema,
        native_tools=first.native_tools and second.native_tools,
        exclusive=first.exclusive or second.exclusive,
    )
