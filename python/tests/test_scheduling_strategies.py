"""manta.util.scheduling_strategies: Ray's strategy classes as plain, checked values."""

import pickle

import pytest

from manta.util.scheduling_strategies import (DoesNotExist, Exists, In, NodeAffinitySchedulingStrategy,
                                              NodeLabelSchedulingStrategy, NotIn, PlacementGroupSchedulingStrategy,
                                              validate_scheduling_strategy)

NODE = "ab" * 28


def test_placement_group_strategy_defaults():
    pg = object()
    s = PlacementGroupSchedulingStrategy(pg)
    assert s.placement_group is pg
    assert s.placement_group_bundle_index == -1
    assert s.placement_group_capture_child_tasks is None
    s = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=2, placement_group_capture_child_tasks=True)
    assert (s.placement_group_bundle_index, s.placement_group_capture_child_tasks) == (2, True)
    validate_scheduling_strategy(s)


@pytest.mark.parametrize("index, error", [(-2, ValueError), (1.0, TypeError), (True, TypeError)])
def test_placement_group_strategy_bad_index(index, error):
    with pytest.raises(error):
        PlacementGroupSchedulingStrategy(None, placement_group_bundle_index=index)


def test_node_affinity_strategy():
    s = NodeAffinitySchedulingStrategy(NODE, soft=False, _fail_on_unavailable=True)
    assert (s.node_id, s.soft, s._spill_on_unavailable, s._fail_on_unavailable) == (NODE, False, False, True)
    assert s == NodeAffinitySchedulingStrategy(NODE, False, _fail_on_unavailable=True)
    assert pickle.loads(pickle.dumps(s)) == s
    assert "NodeAffinitySchedulingStrategy(node_id=" in repr(s)
    validate_scheduling_strategy(s)


@pytest.mark.parametrize("kwargs, error", [
    ({"node_id": "", "soft": True}, TypeError),
    ({"node_id": "not-hex", "soft": True}, ValueError),
    ({"node_id": NODE, "soft": "yes"}, TypeError),
    ({"node_id": NODE, "soft": False, "_spill_on_unavailable": True}, ValueError),
    ({"node_id": NODE, "soft": True, "_fail_on_unavailable": True}, ValueError),
])
def test_node_affinity_strategy_checks(kwargs, error):
    with pytest.raises(error):
        NodeAffinitySchedulingStrategy(**kwargs)


def test_node_label_strategy_is_built_but_not_supported():
    s = NodeLabelSchedulingStrategy({"manta.io/tpu-slice-name": In("tpu-group-0"), "zone": NotIn("a")},
                                    soft={"spot": DoesNotExist(), "fast": Exists()})
    assert s.hard["manta.io/tpu-slice-name"].values == ["tpu-group-0"]
    with pytest.raises(NotImplementedError, match="NodeLabelSchedulingStrategy is not supported"):
        validate_scheduling_strategy(s)
    with pytest.raises(TypeError):
        NodeLabelSchedulingStrategy({"zone": "a"})


@pytest.mark.parametrize("value", [None, "DEFAULT", "SPREAD"])
def test_string_strategies(value):
    validate_scheduling_strategy(value)


def test_bad_strategies():
    with pytest.raises(ValueError):
        validate_scheduling_strategy("PACK")
    with pytest.raises(TypeError):
        validate_scheduling_strategy(42)
