"""ModelPreset: the policies measured to help the brain's own model, taken at the run's start.

Issue 46, item 4: a policy that wins for one model and loses for another may be on by default for
the model it helps. The model catalogue records those (``CatalogueModel.preset``, each with its
measurement), the brain declares them (:attr:`~shapeloop.Capabilities.preset`: the embedded backend
for a catalogue model), and this placeholder in :data:`~shapeloop.policies.DEFAULT` stands for them:
at the run's start it becomes those policies (none for a brain that declares none), and the run says
so in a :class:`~shapeloop.events.PolicyIntervened` event. ``policies=()`` is still the plain loop,
for every model; a list of your own takes no preset unless it holds a ``ModelPreset()``.
"""

from __future__ import annotations

from shapeloop.policies.base import Policy


class ModelPreset(Policy):
    """Stands for the policies the brain's model declares (:attr:`~shapeloop.Capabilities.preset`);
    the run replaces it with them at its start, and runs nothing in its name.

    Args:
        drop: names of policies left out of the model's preset (``--policies default,-lookup-hint``).
    """

    def __init__(self, *, drop: frozenset[str] = frozenset()) -> None:
        self.drop = frozenset(drop)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModelPreset) and other.drop == self.drop

    def __hash__(self) -> int:
        return hash((ModelPreset, self.drop))
