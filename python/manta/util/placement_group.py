"""Placement groups with Ray's API (ray.util.placement_group), over the core
worker's: the GCS reserves the bundles; nothing is scheduled in Python."""

import os

from manta import _core
from manta._private import api
from manta._private.state import state

_STRATEGIES = {"PACK": 0, "SPREAD": 1, "STRICT_PACK": 2, "STRICT_SPREAD": 3}
_STATES = {0: "PENDING", 1: "PREPARED", 2: "CREATED", 3: "REMOVED", 4: "RESCHEDULING"}


class PlacementGroupID:

    def __init__(self, binary):
        self._binary = binary

    def binary(self):
        return self._binary

    def hex(self):
        return self._binary.hex()

    def __eq__(self, other):
        return isinstance(other, PlacementGroupID) and other._binary == self._binary

    def __hash__(self):
        return hash(self._binary)

    def __repr__(self):
        return "PlacementGroupID(%s)" % self.hex()


class PlacementGroup:
    """A reservation of bundles of resources; tasks and actors run in it
    through PlacementGroupSchedulingStrategy."""

    def __init__(self, id, bundle_specs=None):
        self.id = id
        self._bundles = bundle_specs

    @property
    def bundle_specs(self):
        if self._bundles is None:
            info = _core.get_placement_group(self.id.binary())
            self._bundles = [b["resources"] for b in info["bundles"]]
        return list(self._bundles)

    @property
    def bundle_count(self):
        return len(self.bundle_specs)

    def ready(self):
        """An ObjectRef that resolves (to True) once every bundle is reserved."""
        from manta.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        return _ready_task().options(
            num_cpus=0, scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=self,
                                                                             placement_group_bundle_index=-1)).remote()

    def wait(self, timeout_seconds=30):
        """Whether the group is created within the timeout."""
        info = _core.wait_placement_group_ready(self.id.binary(), float(timeout_seconds))
        return info["state"] == 2

    def __eq__(self, other):
        return isinstance(other, PlacementGroup) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __repr__(self):
        return "PlacementGroup(%s)" % self.id.hex()


def _ready_fn():
    return True


def _ready_task():
    from manta._private.remote_function import RemoteFunction
    return RemoteFunction(_ready_fn, {})


def placement_group(bundles, strategy="PACK", name="", lifetime=None, bundle_label_selector=None,
                    _max_cpu_fraction_per_node=None, _soft_target_node_id=None):
    """Reserves `bundles` (a list of resource dicts) with `strategy`."""
    api.auto_init()
    if not isinstance(bundles, list) or not bundles:
        raise ValueError("The placement group `bundles` argument must be a non-empty list of dicts")
    for b in bundles:
        if not isinstance(b, dict) or not b or any(
                not isinstance(v, (int, float)) or v != v or v < 0 for v in b.values()):
            raise ValueError("Bundles must be non-empty dicts of non-negative numbers, got %r" % (b,))
        if all(v == 0 for v in b.values()):
            raise ValueError("Bundles cannot be an empty dictionary or resources with only 0 values. "
                             "Bundles: %r" % (bundles,))
    if strategy not in _STRATEGIES:
        raise ValueError("Invalid placement group strategy %s. Supported strategies are: %s." %
                         (strategy, ", ".join(_STRATEGIES)))
    if lifetime not in (None, "detached"):
        raise ValueError("Placement group `lifetime` argument must be either `None` or 'detached'")
    for unsupported, value in (("_max_cpu_fraction_per_node", _max_cpu_fraction_per_node), ("_soft_target_node_id",
                                                                                            _soft_target_node_id)):
        if value is not None:
            raise ValueError("%s is not supported by Manta" % unsupported)
    selectors = list(bundle_label_selector or [])
    if selectors and len(selectors) != len(bundles):
        raise ValueError("bundle_label_selector must have one selector per bundle")
    group_id = os.urandom(18)
    _core.create_placement_group(group_id, name, state.namespace, _STRATEGIES[strategy],
                                 [{k: float(v) for k, v in b.items()} for b in bundles], [dict(s) for s in selectors],
                                 lifetime == "detached")
    return PlacementGroup(PlacementGroupID(group_id), [dict(b) for b in bundles])


def remove_placement_group(placement_group):
    api.auto_init()
    if not isinstance(placement_group, PlacementGroup):
        raise TypeError("remove_placement_group expects a PlacementGroup")
    _core.remove_placement_group(placement_group.id.binary())


def get_placement_group(placement_group_name):
    api.auto_init()
    if not placement_group_name:
        raise ValueError("Please supply a non-empty value to get_placement_group")
    try:
        info = _core.get_named_placement_group(placement_group_name, state.namespace)
    except KeyError:
        raise ValueError("Failed to look up placement group with name: %s" % placement_group_name) from None
    return PlacementGroup(PlacementGroupID(info["id"]))


def _table_entry(info):
    return {
        "placement_group_id": info["id"].hex(),
        "name": info["name"],
        "bundles": {b["index"]: b["resources"] for b in info["bundles"]},
        "bundles_to_node_id": {b["index"]: b["node_id"] for b in info["bundles"]},
        "strategy": {v: k for k, v in _STRATEGIES.items()}[info["strategy"]],
        "state": _STATES.get(info["state"], "UNKNOWN"),
        "stats": {"scheduling_state": info["state_message"]},
    }


def placement_group_table(placement_group=None):
    """Ray's table entry of one group (or, with none, raises: listing every
    group is `manta list placement-groups`)."""
    api.auto_init()
    if placement_group is None:
        raise ValueError("placement_group_table() of every group is not supported: pass a group, "
                         "or use `manta list placement-groups`")
    return _table_entry(_core.get_placement_group(placement_group.id.binary()))


def get_current_placement_group():
    """The group the current task or actor runs in, or None."""
    context = _core.task_context() if _core.is_initialized() else None
    group = (context or {}).get("placement_group_id", b"")
    return PlacementGroup(PlacementGroupID(group)) if group else None
