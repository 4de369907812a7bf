"""TPU slices with Ray's API (ray.util.tpu), over Manta's C++ slices (manta/tpu.h).

    from manta.util.tpu import slice_placement_group, dispatch

    spg = slice_placement_group("4x4", "v6e", num_slices=2)   # 2 whole v6e-16 slices
    manta.get(spg.ready())
    refs = dispatch(train_step, tpu_slice=spg)               # one task per host
    spg.shutdown()

    refs = dispatch(train_step, topology="4x4", accelerator_version="v6e")   # one-shot

Shapes, the listing of the cluster's slices and the reservation itself
(which slice, which host gets which bundle, each host's TPU_* and
MEGASCALE_* variables) are the C++ runtime's; this module only names them
the way Ray does and starts tasks and actors with them.

Where Manta differs from Ray:

* A SlicePlacementGroup is reserved when it is constructed: the call returns
  once every bundle is placed (or raises RuntimeError after
  head_reservation_timeout_s), so ready() resolves at once. There are no
  separate head groups: each slice's head resource is held by its bundle 0,
  placed with the rest of the slice in one decision, so
  head_placement_groups is always empty and release_head_pgs() has nothing
  to do.
* There is one bundle per host holding every chip of that host (plus any
  other resource in resources_per_bundle); a bundle of fewer chips, a
  chips_per_vm other than the slice's, a tpu_resource_per_chip other than
  1, a named or detached group and extra bundle label selectors raise
  ValueError rather than being ignored.
* Tasks and actors started by dispatch() and TpuManager.remote() get each
  host's environment (TPU_WORKER_ID, TPU_WORKER_HOSTNAMES, TPU_NAME,
  TPU_ACCELERATOR_TYPE, TPU_TOPOLOGY and, for several slices,
  MEGASCALE_COORDINATOR_ADDRESS, MEGASCALE_NUM_SLICES, MEGASCALE_SLICE_ID,
  MEGASCALE_PORT; a single slice has the MEGASCALE_* variables removed).
* A slice that dispatch() reserved itself is released by the next call of
  this module once all its tasks have finished (Ray keeps it until the
  driver exits); the job's end releases it too.
"""

import dataclasses
import threading
from typing import Any, Dict, List, Optional

from manta import _core
from manta._private import api
from manta.util.placement_group import PlacementGroup, PlacementGroupID
from manta.util.scheduling_strategies import PlacementGroupSchedulingStrategy

__all__ = [
    "SliceShape",
    "TpuSlice",
    "SlicePlacementGroup",
    "slice_placement_group",
    "dispatch",
    "get_tpu_version_from_type",
    "get_slice_shape",
    "list_slices",
    "get_num_tpu_slices",
    "get_num_ready_tpu_slices",
    "get_tpu_coordinator_env_vars",
    "get_current_pod_name",
    "get_current_pod_worker_count",
    "get_num_tpu_chips_on_node",
    "TpuManager",
    "RayTpuManager",
    "RayTpu",
    "SliceHandles",
    "DEFAULT_TPU_HEAD_RESERVATION_TIMEOUT_S",
    "DEFAULT_MEGASCALE_PORT",
]

DEFAULT_TPU_HEAD_RESERVATION_TIMEOUT_S = 60.0
DEFAULT_MEGASCALE_PORT = 8081

# The node labels a TPU host's raylet sets (see DESIGN.md, "TPU hosts").
SLICE_NAME_LABEL = "manta.io/tpu-slice-name"
WORKER_ID_LABEL = "manta.io/tpu-worker-id"
TOPOLOGY_LABEL = "manta.io/tpu-topology"
POD_TYPE_LABEL = "manta.io/tpu-pod-type"


@dataclasses.dataclass(frozen=True)
class SliceShape:
    """One slice of a version and topology: pod_type "v6e-16", topology "4x4",
    accelerator_type "TPU-V6E", chips_per_host 4, hosts_per_slice 4."""

    pod_type: str
    topology: str
    accelerator_type: str
    chips_per_host: int
    hosts_per_slice: int


@dataclasses.dataclass(frozen=True)
class TpuSlice:
    """A slice the cluster has, all its hosts alive (ray-tpu's RayTpu, with more fields).

    num_hosts: hosts alive now (a listed slice has all of them); head_ip:
    worker 0's address; free: nobody holds its head or any of its chips.
    """

    name: str
    num_hosts: int
    head_ip: str
    topology: str
    pod_type: str
    chips_per_host: int
    free: bool

    @classmethod
    def _of(cls, d):
        return cls(name=d["name"], num_hosts=d["num_hosts"], head_ip=d["head_ip"], topology=d["topology"],
                   pod_type=d["pod_type"], chips_per_host=d["chips_per_host"], free=bool(d["head_free"] and
                                                                                         d["chips_free"]))


RayTpu = TpuSlice

# ---- Shapes and the cluster's slices ----------------------------------------------


def get_tpu_version_from_type(accelerator_type: str) -> str:
    """The generation of an accelerator type or version: "v6e" for "TPU-V6E" or "v6e".
    ValueError for an unknown one."""
    if not isinstance(accelerator_type, str):
        raise TypeError("accelerator_type must be a str, got %s" % type(accelerator_type).__name__)
    return _core.tpu_generation(accelerator_type)


def get_slice_shape(topology: str, accelerator_version: str) -> SliceShape:
    """The shape of one slice: get_slice_shape("4x4", "v6e").hosts_per_slice == 4.
    ValueError naming the problem for an unknown version, a malformed
    topology or one the version does not accept."""
    _check_str("topology", topology)
    _check_str("accelerator_version", accelerator_version)
    return SliceShape(**_core.tpu_slice_shape(accelerator_version, topology))


def list_slices(pod_type: Optional[str] = None) -> Dict[str, List[TpuSlice]]:
    """Every slice with all its hosts alive and none draining, by pod type
    ("v6e-16"), each list by name; only `pod_type`'s when given."""
    api.auto_init()
    _release_finished()
    slices = {k: [TpuSlice._of(d) for d in v] for k, v in _core.tpu_list_slices().items()}
    if pod_type is not None:
        return {pod_type: slices[pod_type]} if pod_type in slices else {}
    return slices


def _slices_of(topology, accelerator_type, tpu_resource_per_chip):
    _check_per_chip(tpu_resource_per_chip)
    shape = get_slice_shape(topology, accelerator_type)
    return [s for s in list_slices().get(shape.pod_type, []) if s.topology == shape.topology]


def get_num_tpu_slices(topology: str, accelerator_type: str, tpu_resource_per_chip: Optional[int] = None) -> int:
    """How many slices of this shape have every host alive, held or not."""
    return len(_slices_of(topology, accelerator_type, tpu_resource_per_chip))


def get_num_ready_tpu_slices(topology: str, accelerator_type: str, tpu_resource_per_chip: Optional[int] = None) -> int:
    """How many slices of this shape have every host alive and nothing holding them."""
    return sum(1 for s in _slices_of(topology, accelerator_type, tpu_resource_per_chip) if s.free)


def get_tpu_coordinator_env_vars(coordinator_address: str, num_slices: int, slice_id: int,
                                 coordinator_port: str = str(DEFAULT_MEGASCALE_PORT)) -> Dict[str, str]:
    """The MEGASCALE_* variables of slice `slice_id` of a multi-slice run."""
    return {
        "MEGASCALE_COORDINATOR_ADDRESS": coordinator_address,
        "MEGASCALE_PORT": str(coordinator_port),
        "MEGASCALE_NUM_SLICES": str(num_slices),
        "MEGASCALE_SLICE_ID": str(slice_id),
    }


def _this_node():
    api.auto_init()
    me = _core.node_id()
    for n in _core.nodes():
        if n["node_id"] == me:
            return n
    return None


def get_current_pod_name() -> Optional[str]:
    """The name of the slice (TPU_NAME) this process's node belongs to, or None."""
    node = _this_node()
    return (node or {}).get("labels", {}).get(SLICE_NAME_LABEL) or None


def get_current_pod_worker_count() -> Optional[int]:
    """The number of hosts of the slice this process's node belongs to, or None."""
    labels = (_this_node() or {}).get("labels", {})
    pod_type, topology = labels.get(POD_TYPE_LABEL), labels.get(TOPOLOGY_LABEL)
    if not pod_type or not topology:
        return None
    return get_slice_shape(topology, pod_type.rsplit("-", 1)[0]).hosts_per_slice


def get_num_tpu_chips_on_node() -> int:
    """The TPU chips of this process's node (0 on a host without TPUs)."""
    return int((_this_node() or {}).get("resources", {}).get("TPU", 0))


def _check_str(name, value):
    if not isinstance(value, str) or not value.strip():
        raise ValueError("%s must be a non-empty string, got %r" % (name, value))


def _check_per_chip(tpu_resource_per_chip):
    if tpu_resource_per_chip not in (None, 1):
        raise ValueError("tpu_resource_per_chip=%r is not supported by Manta: a TPU resource is one chip" %
                         (tpu_resource_per_chip,))


# ---- Reserving slices -------------------------------------------------------------


def _timeout(seconds, name):
    if seconds is None:
        return -1.0
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds != seconds or seconds < 0:
        raise ValueError("%s must be None or a non-negative number of seconds, got %r" % (name, seconds))
    return float(seconds)


class SlicePlacementGroup:
    """Whole TPU slices reserved for this job: one bundle per host, bundle h
    of a slice on the host whose TPU_WORKER_ID is h.

    Args:
        topology: each slice's topology, e.g. "4x4" or "2x2x2".
        accelerator_version: the generation, e.g. "v6e", "v4" (or "TPU-V6E").
        resources_per_bundle: each host's bundle; default {"TPU": chips per host}
            (a TPU amount, when given, must be the chips per host).
        strategy: the groups' strategy; default STRICT_SPREAD.
        num_slices: how many slices.
        chips_per_vm: None or the slice's chips per host.
        head_reservation_timeout_s: how long the whole reservation may take
            (None: for ever); RuntimeError (DEADLINE_EXCEEDED) after it, with
            nothing left reserved.
        pg_per_slice: one placement group per slice (slice_placement_groups)
            instead of one for all (slice_placement_group).
        megascale_port: MEGASCALE_PORT of a multi-slice run.

    A bad version, topology or num_slices raises ValueError before the
    cluster is asked anything.
    """

    def __init__(self, topology: str, accelerator_version: str, resources_per_bundle: Optional[Dict[str, float]] = None,
                 strategy: Optional[str] = None, name: str = "", lifetime: Optional[str] = None, num_slices: int = 1,
                 chips_per_vm: Optional[int] = None,
                 head_reservation_timeout_s: Optional[float] = DEFAULT_TPU_HEAD_RESERVATION_TIMEOUT_S,
                 bundle_label_selector: Optional[List[Dict[str, str]]] = None, pg_per_slice: bool = False,
                 tpu_resource_per_chip: Optional[int] = None, megascale_port: int = DEFAULT_MEGASCALE_PORT):
        self._reservation = None
        self._groups = []
        self._lock = threading.Lock()
        if isinstance(num_slices, bool) or not isinstance(num_slices, int) or num_slices < 1:
            raise ValueError("num_slices must be a positive int, got %r" % (num_slices,))
        shape = get_slice_shape(topology, accelerator_version)
        if name:
            raise ValueError("name is not supported by Manta's slice placement groups")
        if lifetime is not None:
            raise ValueError("lifetime=%r is not supported by Manta's slice placement groups: they live "
                             "as long as the job" % (lifetime,))
        if bundle_label_selector:
            raise ValueError("bundle_label_selector is not supported by Manta's slice placement groups: "
                             "each bundle is pinned to its host by the slice's labels")
        if chips_per_vm is not None and chips_per_vm != shape.chips_per_host:
            raise ValueError("chips_per_vm=%r is not supported: a %s slice of topology %s has %d chips per host" %
                             (chips_per_vm, shape.pod_type, shape.topology, shape.chips_per_host))
        _check_per_chip(tpu_resource_per_chip)
        bundle = self._bundle(resources_per_bundle, shape)
        if strategy is not None and not isinstance(strategy, str):
            raise TypeError("strategy must be a str")
        api.auto_init()
        _release_finished()
        self._shape = shape
        self._accelerator_version = get_tpu_version_from_type(accelerator_version)
        self._pg_per_slice = bool(pg_per_slice)
        self._reservation = _core.tpu_reserve_slices(topology, accelerator_version, num_slices, bundle, strategy or "",
                                                     not self._pg_per_slice,
                                                     _timeout(head_reservation_timeout_s, "head_reservation_timeout_s"),
                                                     int(megascale_port))
        self._groups = [PlacementGroup(PlacementGroupID(g)) for g in self._reservation.groups]
        self._slices = [TpuSlice._of(d) for d in self._reservation.slices]
        self._bundle_resources = dict(self._reservation.bundle_resources)
        self._num_slices = self._reservation.num_slices
        self._hosts_per_slice = self._reservation.hosts_per_slice

    @staticmethod
    def _bundle(resources_per_bundle, shape):
        bundle = dict(resources_per_bundle or {})
        for k, v in bundle.items():
            if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v < 0:
                raise ValueError("resources_per_bundle must map names to non-negative numbers, got %r: %r" % (k, v))
        tpus = bundle.setdefault("TPU", shape.chips_per_host)
        if tpus != shape.chips_per_host:
            raise ValueError("resources_per_bundle['TPU']=%r is not supported: Manta reserves one bundle per "
                             "host holding its %d chips" % (tpus, shape.chips_per_host))
        return {k: float(v) for k, v in bundle.items()}

    # Ray's accessors.

    @property
    def slice_placement_group(self) -> Optional[PlacementGroup]:
        """The placement group of every slice's bundles (pg_per_slice=False)."""
        if self._pg_per_slice:
            raise ValueError("pg_per_slice=True, use `slice_placement_groups` instead.")
        return self._groups[0] if self._groups else None

    @property
    def placement_group(self) -> Optional[PlacementGroup]:
        return self.slice_placement_group

    @property
    def slice_placement_groups(self) -> List[PlacementGroup]:
        """One placement group per slice (pg_per_slice=True)."""
        if not self._pg_per_slice:
            raise ValueError("pg_per_slice=False, use `slice_placement_group` instead.")
        return list(self._groups)

    @property
    def chips_per_host(self) -> int:
        return self._shape.chips_per_host

    @property
    def devices_per_host(self) -> int:
        return self._shape.chips_per_host

    @property
    def tpu_resource_per_chip(self) -> int:
        return 1

    @property
    def num_hosts(self) -> int:
        """Hosts in all the slices."""
        return self._hosts_per_slice * self._num_slices

    @property
    def num_bundles(self) -> int:
        return self.num_hosts

    @property
    def hosts_per_slice(self) -> int:
        return self._hosts_per_slice

    @property
    def topology(self) -> str:
        return self._shape.topology

    @property
    def accelerator_version(self) -> str:
        return self._accelerator_version

    @property
    def pod_type(self) -> str:
        return self._shape.pod_type

    @property
    def num_slices(self) -> int:
        return self._num_slices

    @property
    def head_placement_groups(self) -> List[PlacementGroup]:
        """Always empty: each slice's head is held by its bundle 0."""
        return []

    @property
    def bundle_label_selector(self) -> List[Dict[str, str]]:
        """Each bundle's label selector, in bundle order, as the GCS holds it."""
        out = []
        for g in self._groups:
            out += [dict(b["label_selector"]) for b in _core.get_placement_group(g.id.binary())["bundles"]]
        return out

    @property
    def bundle_resources(self) -> Dict[str, float]:
        return dict(self._bundle_resources)

    def release_head_pgs(self, slice_index: Optional[int] = None) -> None:
        """Nothing to do: each slice's head is held by its bundle 0, with the slice, until shutdown()."""
        if slice_index is not None and not 0 <= slice_index < self._num_slices:
            raise ValueError(f"Invalid slice_index: {slice_index}.")

    # Manta's.

    @property
    def slices(self) -> List[TpuSlice]:
        """The reserved slices, in slice order."""
        return list(self._slices)

    @property
    def slice_names(self) -> List[str]:
        return [s.name for s in self._slices]

    def host_ips(self, slice_index: int) -> List[str]:
        """The addresses of the slice's hosts, by TPU_WORKER_ID."""
        return list(self._reservation.host_ips(slice_index))

    def bundle(self, slice_index: int, host: int):
        """(PlacementGroup, bundle index) of that host of that slice."""
        group_id, index = self._reservation.bundle(slice_index, host)
        return PlacementGroup(PlacementGroupID(group_id)), index

    def process_env(self, slice_index: int, host: int) -> Dict[str, str]:
        """The environment of a process on that host (an empty value: remove the variable)."""
        return dict(self._reservation.process_env(slice_index, host))

    def scheduling_options(self, slice_index: int, host: int) -> Dict[str, Any]:
        """.options() that run a task or actor on that host, in its bundle, with its
        environment: num_cpus, resources, scheduling_strategy, runtime_env."""
        group, index = self.bundle(slice_index, host)
        resources = dict(self._bundle_resources)
        cpus = resources.pop("CPU", 0)
        return {
            "num_cpus": cpus,
            "resources": resources,
            "scheduling_strategy": PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index),
            "runtime_env": {"env_vars": self.process_env(slice_index, host)},
        }

    def ready(self):
        """An ObjectRef resolving to True once the group is placed (a list of
        them with pg_per_slice=True). The reservation is placed already when
        the constructor returns."""
        if self._pg_per_slice:
            return [g.ready() for g in self._groups]
        return self.slice_placement_group.ready()

    def wait(self, timeout_seconds: float = 30) -> bool:
        """Whether every group is placed within the timeout."""
        return all(g.wait(timeout_seconds) for g in self._groups)

    def shutdown(self) -> None:
        """Removes the groups: the chips go back, actors in them die. Idempotent."""
        with self._lock:
            if self._reservation is not None and _core.is_initialized():
                self._reservation.release()
            self._groups = []

    remove = shutdown

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    def __repr__(self):
        return "SlicePlacementGroup(%s x%d: %s)" % (self.pod_type, self._num_slices, ", ".join(self.slice_names))


def slice_placement_group(topology: str, accelerator_version: str, resources_per_bundle: Optional[Dict[str,
                                                                                                       float]] = None,
                          num_slices: int = 1, chips_per_vm: Optional[int] = None, pg_per_slice: bool = False,
                          tpu_resource_per_chip: Optional[int] = None, **kwargs) -> SlicePlacementGroup:
    """Reserves `num_slices` whole slices; see SlicePlacementGroup."""
    return SlicePlacementGroup(topology=topology, accelerator_version=accelerator_version,
                               resources_per_bundle=resources_per_bundle, num_slices=num_slices,
                               chips_per_vm=chips_per_vm, pg_per_slice=pg_per_slice,
                               tpu_resource_per_chip=tpu_resource_per_chip, **kwargs)


# ---- Running on every host ----------------------------------------------------------

# Slices reserved by dispatch() or TpuManager.remote() for tasks: released
# once their tasks have finished, by the next call of this module.
_finished_lock = threading.Lock()
_owned = []  # (SlicePlacementGroup, [ObjectRef])


def _release_finished():
    if not _core.is_initialized():
        return
    with _finished_lock:
        keep = []
        for spg, refs in _owned:
            try:
                done, _ = api.wait(refs, num_returns=len(refs), timeout=0)
                if len(done) == len(refs):
                    spg.shutdown()
                    continue
            except Exception:  # noqa: BLE001 - a stale entry (another session): dropped
                continue
            keep.append((spg, refs))
        _owned[:] = keep


def _release_when_done(spg, refs):
    with _finished_lock:
        _owned.append((spg, [r for r in refs if isinstance(r, _core.ObjectRef)]))


def _as_remote(actor_or_fn):
    if hasattr(actor_or_fn, "options") and hasattr(actor_or_fn, "remote"):
        return actor_or_fn
    if callable(actor_or_fn):
        import manta
        return manta.remote(actor_or_fn)
    raise TypeError("expected a @manta.remote function or class, a function or a class, got %s"
                    % type(actor_or_fn).__name__)


def _run_on_hosts(spg, target, slice_indices, args, kwargs, extra_env=None):
    """target.options(...).remote(*args, **kwargs) once per host of each slice, in slice-major order."""
    own_env = dict(((getattr(target, "_options", None) or {}).get("runtime_env") or {}).get("env_vars", {}))
    out = []
    for s in slice_indices:
        for h in range(spg.hosts_per_slice):
            options = spg.scheduling_options(s, h)
            env = dict(own_env)
            env.update(extra_env or {})
            env.update(options["runtime_env"]["env_vars"])
            options["runtime_env"] = {"env_vars": env}
            out.append(target.options(**options).remote(*args, **kwargs))
    return out


def dispatch(fn: Any, *args: Any, topology: Optional[str] = None, accelerator_version: Optional[str] = None,
             tpu_slice: Optional[SlicePlacementGroup] = None, slice_index: Optional[int] = None, num_slices: int = 1,
             chips_per_vm: Optional[int] = None,
             head_reservation_timeout_s: Optional[float] = DEFAULT_TPU_HEAD_RESERVATION_TIMEOUT_S,
             pg_ready_timeout_s: Optional[float] = None, **kwargs: Any) -> list:
    """Runs the remote function `fn(*args, **kwargs)` once on every host of a
    slice (of each slice), in that host's bundle with its TPU and MEGASCALE
    variables; the ObjectRefs in slice-major order (host h of slice s is
    s * hosts_per_slice + h).

    With tpu_slice, runs on those slices (only slice `slice_index`'s when
    given) and leaves them reserved; without, reserves `num_slices` slices of
    `topology` and `accelerator_version` and releases them after the tasks.
    The resources and scheduling strategy of `fn` are overridden; its
    env_vars are kept unless a host's variable has the same name.

    Raises TypeError when fn is no remote function, ValueError for a bad
    request, TimeoutError when the groups are not placed within
    pg_ready_timeout_s.
    """
    if not hasattr(fn, "options"):
        raise TypeError(f"fn must be a @manta.remote-decorated function, but got {type(fn).__name__!r} "
                        "which has no .options() method.")
    owns = tpu_slice is None
    if owns:
        if slice_index is not None:
            raise ValueError("slice_index can only be used when an existing tpu_slice is provided.")
        if topology is None or accelerator_version is None:
            raise ValueError("topology and accelerator_version are required when tpu_slice is not provided.")
        tpu_slice = SlicePlacementGroup(topology=topology, accelerator_version=accelerator_version,
                                        num_slices=num_slices, chips_per_vm=chips_per_vm,
                                        head_reservation_timeout_s=head_reservation_timeout_s)
    elif not isinstance(tpu_slice, SlicePlacementGroup):
        raise TypeError("tpu_slice must be a SlicePlacementGroup, got %s" % type(tpu_slice).__name__)
    else:
        _release_finished()
    if not tpu_slice._groups:
        raise ValueError("The provided tpu_slice has already been shut down. Create a new SlicePlacementGroup "
                         "or pass tpu_slice=None to reserve one automatically.")
    if slice_index is not None and not (isinstance(slice_index, int) and 0 <= slice_index < tpu_slice.num_slices):
        raise ValueError(f"Invalid slice_index {slice_index}. Must be between 0 and {tpu_slice.num_slices - 1}.")
    wait_s = _timeout(pg_ready_timeout_s, "pg_ready_timeout_s")
    for g in tpu_slice._groups:
        if _core.wait_placement_group_ready(g.id.binary(), wait_s)["state"] != 2:
            if owns:
                tpu_slice.shutdown()
            raise TimeoutError(f"TPU slice placement group was not ready within {pg_ready_timeout_s}s.")
    indices = range(tpu_slice.num_slices) if slice_index is None else [slice_index]
    try:
        refs = _run_on_hosts(tpu_slice, fn, indices, args, kwargs)
    except BaseException:
        if owns:
            tpu_slice.shutdown()
        raise
    if owns:
        _release_when_done(tpu_slice, refs)
    return refs


class SliceHandles(list):
    """The ObjectRefs or ActorHandles TpuManager.remote started, one per host in
    slice-major order, with the slices they hold: release() frees them."""

    def __init__(self, handles, slice_groups):
        super().__init__(handles)
        self.slice_placement_groups = list(slice_groups)

    def release(self):
        for spg in self.slice_placement_groups:
            spg.shutdown()


class TpuManager:
    """ray-tpu's RayTpuManager over Manta's slices: find the slices, run a
    function or an actor once per host of each.

        tpus = TpuManager.get_available_resources()["v6e-16"][:2]
        refs = TpuManager.remote(tpus, train, multislice=True, env={"XLA_FLAGS": "..."})
        manta.get(refs)
        refs.release()      # or let it go: tasks' slices go back once they finish

    remote() reserves as many slices of the same shape as `tpus` (the C++
    reservation picks free ones, preferring wholly free slices), so two
    managers never share a slice.
    """

    @classmethod
    def get_available_resources(cls) -> Dict[str, List[TpuSlice]]:
        """The free slices, by pod type ("v6e-16")."""
        out = {}
        for pod_type, slices in list_slices().items():
            free = [s for s in slices if s.free]
            if free:
                out[pod_type] = free
        return out

    @classmethod
    def list_slices(cls) -> Dict[str, List[TpuSlice]]:
        """Every slice with all its hosts alive, free or not, by pod type."""
        return list_slices()

    @classmethod
    def remote(cls, tpus: List[TpuSlice], actor_or_fn, multislice: bool = False, env: Optional[Dict[str, str]] = None,
               *args, **kwargs) -> SliceHandles:
        """Starts `actor_or_fn(*args, **kwargs)` (a function or class, remote or
        not) once per host of len(tpus) slices shaped like `tpus`, with `env`
        and each host's TPU variables; with multislice, the slices form one
        multi-slice run (MEGASCALE_* set), else each is a run of its own."""
        if isinstance(tpus, TpuSlice):
            tpus = [tpus]
        tpus = list(tpus or [])
        if not tpus or not all(isinstance(t, TpuSlice) for t in tpus):
            raise ValueError("tpus must be a non-empty list of TpuSlice (from get_available_resources())")
        if env is not None and not (isinstance(env, dict) and
                                    all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
            raise TypeError("env must be a dict of str to str")
        target = _as_remote(actor_or_fn)
        groups = []
        if multislice:
            shapes = {(t.pod_type, t.topology) for t in tpus}
            if len(shapes) != 1:
                raise ValueError("a multislice run needs slices of one shape, got %s"
                                 % ", ".join("%s (%s)" % s for s in sorted(shapes)))
            groups.append(_slice_group_like(tpus[0], len(tpus)))
        else:
            try:
                for t in tpus:
                    groups.append(_slice_group_like(t, 1))
            except BaseException:
                for g in groups:
                    g.shutdown()
                raise
        started = []
        try:
            for g in groups:
                started.append(_run_on_hosts(g, target, range(g.num_slices), args, kwargs, env))
        except BaseException:
            for g in groups:
                g.shutdown()
            raise
        for g, handles in zip(groups, started):
            if all(isinstance(h, _core.ObjectRef) for h in handles):
                _release_when_done(g, handles)
        return SliceHandles([h for handles in started for h in handles], groups)


def _slice_group_like(tpu, num_slices):
    return SlicePlacementGroup(topology=tpu.topology, accelerator_version=tpu.pod_type.rsplit("-", 1)[0],
                               num_slices=num_slices)


RayTpuManager = TpuManager
