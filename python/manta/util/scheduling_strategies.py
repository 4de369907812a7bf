"""Scheduling strategies for `.options(scheduling_strategy=...)`, with Ray's names.

    from manta.util.scheduling_strategies import (
        PlacementGroupSchedulingStrategy, NodeAffinitySchedulingStrategy)

    f.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=0))
    f.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))

Besides these classes a strategy may be the string "DEFAULT" or "SPREAD".
They are plain values checked at construction; the API turns them into the
core worker's options. NodeLabelSchedulingStrategy (and its In, NotIn,
Exists, DoesNotExist operators) can be built, but Manta does not schedule
tasks or actors by node labels yet: `check_supported()`, which the API calls
when the strategy is used, raises NotImplementedError. Label selectors on
placement group bundles are supported; reserve a group with them instead.
"""

from typing import Dict, List, Optional, Union

__all__ = [
    "DEFAULT_SCHEDULING_STRATEGY",
    "SPREAD_SCHEDULING_STRATEGY",
    "PlacementGroupSchedulingStrategy",
    "NodeAffinitySchedulingStrategy",
    "NodeLabelSchedulingStrategy",
    "In",
    "NotIn",
    "Exists",
    "DoesNotExist",
    "SchedulingStrategyT",
]

DEFAULT_SCHEDULING_STRATEGY = "DEFAULT"
SPREAD_SCHEDULING_STRATEGY = "SPREAD"
STRING_STRATEGIES = (DEFAULT_SCHEDULING_STRATEGY, SPREAD_SCHEDULING_STRATEGY)


class _Value:
    """Equality and repr over the instance's fields."""

    __slots__ = ()

    def _fields(self):
        return tuple((name, getattr(self, name)) for name in self.__slots__)

    def __eq__(self, other):
        return type(self) is type(other) and self._fields() == other._fields()

    def __hash__(self):
        return hash((type(self), tuple(repr(v) for _, v in self._fields())))

    def __repr__(self):
        inner = ", ".join(f"{name}={value!r}" for name, value in self._fields())
        return f"{type(self).__name__}({inner})"

    def check_supported(self):
        """Raises NotImplementedError when Manta cannot schedule with this strategy."""


class PlacementGroupSchedulingStrategy(_Value):
    """Run in a placement group's reserved resources.

    placement_group: a PlacementGroup (or None: run outside any group, the
    way Ray reads it when a child of a captured task opts out).
    placement_group_bundle_index: the bundle to use; -1 means any bundle.
    placement_group_capture_child_tasks: whether tasks and actors this one
    starts are put in the same group too (None: the caller's default, False).
    """

    __slots__ = ("placement_group", "placement_group_bundle_index", "placement_group_capture_child_tasks")

    def __init__(self, placement_group, placement_group_bundle_index: int = -1,
                 placement_group_capture_child_tasks: Optional[bool] = None):
        if isinstance(placement_group_bundle_index, bool) or not isinstance(placement_group_bundle_index, int):
            raise TypeError("placement_group_bundle_index must be an int, "
                            f"got {type(placement_group_bundle_index).__name__}")
        if placement_group_bundle_index < -1:
            raise ValueError("placement_group_bundle_index must be -1 (any bundle) or a bundle's index, "
                             f"got {placement_group_bundle_index}")
        if placement_group_capture_child_tasks is not None and not isinstance(placement_group_capture_child_tasks,
                                                                              bool):
            raise TypeError("placement_group_capture_child_tasks must be a bool or None")
        self.placement_group = placement_group
        self.placement_group_bundle_index = placement_group_bundle_index
        self.placement_group_capture_child_tasks = placement_group_capture_child_tasks


class NodeAffinitySchedulingStrategy(_Value):
    """Run on the node with id `node_id` (hex, as get_runtime_context().get_node_id() gives).

    soft=False: only there; the task fails with TaskUnschedulableError if
    that node is dead or unknown. soft=True: there if it is alive and has
    room, else wherever the default strategy puts it. With soft=True,
    _spill_on_unavailable lets it run elsewhere when the node is alive but
    busy; with soft=False, _fail_on_unavailable fails it at once instead of
    waiting for room.
    """

    __slots__ = ("node_id", "soft", "_spill_on_unavailable", "_fail_on_unavailable")

    def __init__(self, node_id: str, soft: bool, _spill_on_unavailable: bool = False,
                 _fail_on_unavailable: bool = False):
        if hasattr(node_id, "hex") and not isinstance(node_id, (str, bytes)):
            node_id = node_id.hex()
        if not isinstance(node_id, str) or not node_id:
            raise TypeError(f"node_id must be a node's hex id string, got {node_id!r}")
        try:
            bytes.fromhex(node_id)
        except ValueError:
            raise ValueError(f"node_id {node_id!r} is not a hex id") from None
        for name, value in (("soft", soft), ("_spill_on_unavailable", _spill_on_unavailable), ("_fail_on_unavailable",
                                                                                               _fail_on_unavailable)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
        if _spill_on_unavailable and not soft:
            raise ValueError("_spill_on_unavailable needs soft=True")
        if _fail_on_unavailable and soft:
            raise ValueError("_fail_on_unavailable needs soft=False")
        self.node_id = node_id
        self.soft = soft
        self._spill_on_unavailable = _spill_on_unavailable
        self._fail_on_unavailable = _fail_on_unavailable


class _LabelOperator(_Value):
    __slots__ = ()


class In(_LabelOperator):
    """The label's value is one of `values`."""

    __slots__ = ("values",)

    def __init__(self, *values: str):
        if not values or not all(isinstance(v, str) for v in values):
            raise ValueError("In() takes one or more string values")
        self.values = list(values)


class NotIn(_LabelOperator):
    """The label is missing or its value is none of `values`."""

    __slots__ = ("values",)

    def __init__(self, *values: str):
        if not values or not all(isinstance(v, str) for v in values):
            raise ValueError("NotIn() takes one or more string values")
        self.values = list(values)


class Exists(_LabelOperator):
    """The node has the label."""

    __slots__ = ()


class DoesNotExist(_LabelOperator):
    """The node lacks the label."""

    __slots__ = ()


LabelMatchExpressionsT = Dict[str, _LabelOperator]


def _check_expressions(name, expressions):
    if expressions is None:
        return {}
    if not isinstance(expressions, dict):
        raise TypeError(f"{name} must be a dict of label name to In/NotIn/Exists/DoesNotExist")
    for key, op in expressions.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"{name}: label names must be non-empty strings, got {key!r}")
        if not isinstance(op, _LabelOperator):
            raise TypeError(f"{name}['{key}'] must be In(...), NotIn(...), Exists() or DoesNotExist(), "
                            f"got {op!r}")
    return dict(expressions)


class NodeLabelSchedulingStrategy(_Value):
    """Run on a node whose labels match `hard`, preferring those that match `soft`.

    Not supported by Manta's scheduler yet: check_supported() raises
    NotImplementedError, and the API raises it when the strategy is used.
    """

    __slots__ = ("hard", "soft")

    def __init__(self, hard: LabelMatchExpressionsT, *, soft: Optional[LabelMatchExpressionsT] = None):
        self.hard = _check_expressions("hard", hard)
        self.soft = _check_expressions("soft", soft)
        if not self.hard and not self.soft:
            raise ValueError("NodeLabelSchedulingStrategy needs hard or soft label expressions")

    def check_supported(self):
        raise NotImplementedError(
            "NodeLabelSchedulingStrategy is not supported by Manta yet: tasks and actors cannot be "
            "scheduled by node labels. Reserve a placement group whose bundles carry label selectors "
            "and use PlacementGroupSchedulingStrategy, or NodeAffinitySchedulingStrategy.")


SchedulingStrategyT = Union[None, str, PlacementGroupSchedulingStrategy, NodeAffinitySchedulingStrategy,
                            NodeLabelSchedulingStrategy]


def validate_scheduling_strategy(strategy) -> None:
    """Raises TypeError/ValueError for what is no strategy, NotImplementedError for one
    Manta cannot schedule with; for the API's `.options()`."""
    if strategy is None:
        return
    if isinstance(strategy, str):
        if strategy not in STRING_STRATEGIES:
            raise ValueError(f"scheduling_strategy must be one of {STRING_STRATEGIES} or a strategy object, "
                             f"got {strategy!r}")
        return
    if not isinstance(strategy, _Value):
        raise TypeError(f"scheduling_strategy must be a string or a strategy object, got {type(strategy).__name__}")
    strategy.check_supported()
