"""manta.util.tpu against a simulated TPU cluster: `manta up --tpu v4-16
--slices 2` (a head and 4 hosts: two slices of topology 2x2x2, 2 hosts of 4
chips each, every host a raylet with the environment GKE gives a TPU pod)."""

import os

import pytest

from conftest import start_tpu_cluster, stop_head, wait_for

tpu = pytest.importorskip("manta.util.tpu")
import manta  # noqa: E402
from manta import _core  # noqa: E402

TOPOLOGY, VERSION, POD_TYPE = "2x2x2", "v4", "v4-16"
SLICE_NAMES = {"tpu-group-0", "tpu-group-1"}


def _manta_up():
    return start_tpu_cluster(POD_TYPE)


@pytest.fixture(scope="module")
def driver():
    cluster = _manta_up()
    try:
        manta.init(address=cluster.address, _temp_dir=cluster.temp_dir)
        yield cluster
    finally:
        manta.shutdown()
        stop_head(cluster)


def _all_free():
    return tpu.get_num_ready_tpu_slices(TOPOLOGY, VERSION) == 2


@pytest.fixture
def free(driver):
    """Every test starts and ends with both slices free."""
    wait_for(_all_free, 10, "both slices to be free")
    yield driver
    wait_for(_all_free, 10, "both slices to be free again")


def _where():
    """What a host's task sees: its TPU and MEGASCALE variables, its node."""
    keys = ("TPU_", "MEGASCALE_", "MY_")
    return {
        "env": {k: v for k, v in os.environ.items() if k.startswith(keys)},
        "node": _core.node_id(),
        "pod": tpu.get_current_pod_name(),
        "chips": tpu.get_num_tpu_chips_on_node(),
        "workers": tpu.get_current_pod_worker_count(),
    }


where = manta.remote(_where)
# A variable a single slice's run removes, and one it keeps.
where_flagged = manta.remote(runtime_env={"env_vars": {"MEGASCALE_SLICE_ID": "7", "MY_FLAG": "1"}})(_where)


def _labels():
    return {n["NodeID"]: n["Labels"] for n in manta.nodes()}


def _check_on_own_host(seen):
    """Each result ran on the host its TPU_NAME and TPU_WORKER_ID name."""
    labels = _labels()
    for s in seen:
        node = labels[s["node"]]
        assert node["manta.io/tpu-slice-name"] == s["env"]["TPU_NAME"] == s["pod"]
        assert node["manta.io/tpu-worker-id"] == s["env"]["TPU_WORKER_ID"]
        assert s["chips"] == 4 and s["workers"] == 2


def test_slice_shapes():
    shape = tpu.get_slice_shape("4x4", "v6e")
    assert (shape.pod_type, shape.topology, shape.accelerator_type) == ("v6e-16", "4x4", "TPU-V6E")
    assert (shape.chips_per_host, shape.hosts_per_slice) == (4, 4)
    assert tpu.get_slice_shape("2x4", "TPU-V6E").hosts_per_slice == 1  # a single 8-chip host
    assert tpu.get_slice_shape("2x4", "v6e").chips_per_host == 8
    v4 = tpu.get_slice_shape("2x2x2", "v4")
    assert (v4.pod_type, v4.hosts_per_slice, v4.chips_per_host) == ("v4-16", 2, 4)
    assert tpu.get_slice_shape("16x16", "v6e").hosts_per_slice == 64
    assert tpu.get_tpu_version_from_type("TPU-V5LITEPOD") == "v5litepod"
    assert tpu.get_tpu_coordinator_env_vars("10.0.0.1", 2, 1) == {
        "MEGASCALE_COORDINATOR_ADDRESS": "10.0.0.1", "MEGASCALE_PORT": "8081", "MEGASCALE_NUM_SLICES": "2",
        "MEGASCALE_SLICE_ID": "1"
    }


def test_bad_input_raises_value_error_naming_the_problem():
    with pytest.raises(ValueError, match="v99"):
        tpu.get_slice_shape("4x4", "v99")
    with pytest.raises(ValueError, match="TPU-V99"):
        tpu.get_tpu_version_from_type("TPU-V99")
    with pytest.raises(ValueError, match="topology.*4x"):
        tpu.get_slice_shape("4x", "v6e")
    with pytest.raises(ValueError, match="'3x3' is not valid for accelerator version 'v6e'"):
        tpu.slice_placement_group("3x3", "v6e")
    with pytest.raises(ValueError, match="num_slices"):
        tpu.slice_placement_group("4x4", "v6e", num_slices=0)
    with pytest.raises(ValueError, match="v99"):
        tpu.dispatch(where, topology="4x4", accelerator_version="v99")
    with pytest.raises(ValueError, match="topology and accelerator_version are required"):
        tpu.dispatch(where)
    with pytest.raises(TypeError, match="no .options"):
        tpu.dispatch(lambda: 1, topology="4x4", accelerator_version="v6e")
    with pytest.raises(ValueError, match="chips_per_vm"):
        tpu.slice_placement_group("4x4", "v6e", chips_per_vm=8)
    with pytest.raises(ValueError, match="resources_per_bundle"):
        tpu.slice_placement_group("4x4", "v6e", resources_per_bundle={"TPU": 1})


def test_the_runtime_checks_num_slices_too(driver):
    with pytest.raises(ValueError, match="num_slices must be at least 1, got 0"):
        _core.tpu_reserve_slices(TOPOLOGY, VERSION, 0)


def test_lists_the_clusters_slices(free):
    slices = tpu.list_slices()
    assert list(slices) == [POD_TYPE]
    assert {s.name for s in slices[POD_TYPE]} == SLICE_NAMES
    for s in slices[POD_TYPE]:
        assert (s.num_hosts, s.chips_per_host, s.topology, s.free) == (2, 4, TOPOLOGY, True)
        assert s.head_ip
    assert tpu.get_num_tpu_slices(TOPOLOGY, "TPU-V4") == 2
    assert tpu.get_num_tpu_slices("4x4", "v6e") == 0
    assert tpu.list_slices("v6e-16") == {}
    assert tpu.get_current_pod_name() is None  # the driver is on the head
    assert tpu.get_num_tpu_chips_on_node() == 0


def test_two_slices_reserved_and_one_task_per_host(free):
    spg = tpu.slice_placement_group(TOPOLOGY, VERSION, num_slices=2)
    try:
        assert manta.get(spg.ready(), timeout=10) is True
        assert (spg.num_slices, spg.num_hosts, spg.num_bundles, spg.hosts_per_slice) == (2, 4, 4, 2)
        assert (spg.chips_per_host, spg.topology, spg.accelerator_version) == (4, TOPOLOGY, VERSION)
        assert spg.bundle_resources == {"TPU": 4.0}
        assert set(spg.slice_names) == SLICE_NAMES
        assert spg.placement_group.bundle_count == 4
        assert spg.bundle(1, 1) == (spg.placement_group, 3)
        assert len(spg.host_ips(0)) == 2
        selectors = spg.bundle_label_selector
        # Each bundle names its host by worker id; the GCS puts a slice's
        # bundles on one slice (the group's same-label rule).
        assert selectors[2] == {"manta.io/tpu-pod-type": POD_TYPE, "manta.io/tpu-worker-id": "0"}
        env = spg.process_env(1, 1)
        assert (env["TPU_WORKER_ID"], env["TPU_NAME"], env["MEGASCALE_SLICE_ID"]) == ("1", spg.slice_names[1], "1")
        assert tpu.get_num_ready_tpu_slices(TOPOLOGY, VERSION) == 0  # both held
        assert tpu.TpuManager.get_available_resources() == {}

        seen = manta.get(tpu.dispatch(where, tpu_slice=spg), timeout=60)
        assert len(seen) == 4
        for i, s in enumerate(seen):
            slice_id, host = divmod(i, 2)
            assert s["env"]["TPU_WORKER_ID"] == str(host)
            assert s["env"]["TPU_NAME"] == spg.slice_names[slice_id]
            assert s["env"]["MEGASCALE_SLICE_ID"] == str(slice_id)
            assert s["env"]["MEGASCALE_NUM_SLICES"] == "2"
            assert s["env"]["MEGASCALE_COORDINATOR_ADDRESS"] == spg.host_ips(0)[0]
            assert s["env"]["TPU_ACCELERATOR_TYPE"] == POD_TYPE
        _check_on_own_host(seen)
    finally:
        spg.shutdown()
    # Releasing gives every chip back.
    wait_for(_all_free, 10, "the released slices to be free")
    wait_for(lambda: manta.available_resources().get("TPU") == 16, 10, "16 free chips")
    spg.shutdown()  # idempotent
    with pytest.raises(ValueError, match="shut down"):
        tpu.dispatch(where, tpu_slice=spg)


def test_one_shot_dispatch_on_one_slice_removes_megascale_and_releases(free):
    seen = manta.get(tpu.dispatch(where_flagged, topology=TOPOLOGY, accelerator_version="TPU-V4"), timeout=60)
    assert sorted(s["env"]["TPU_WORKER_ID"] for s in seen) == ["0", "1"]
    assert len({s["env"]["TPU_NAME"] for s in seen}) == 1
    for s in seen:
        assert not any(k.startswith("MEGASCALE_") for k in s["env"]), s["env"]
        assert s["env"]["MY_FLAG"] == "1"
    _check_on_own_host(seen)
    # The slice dispatch reserved goes back once its tasks are done (checked by `free`).


def test_one_group_per_slice_and_a_single_slice_dispatch(free):
    with tpu.slice_placement_group(TOPOLOGY, VERSION, num_slices=2, pg_per_slice=True) as spg:
        groups = spg.slice_placement_groups
        assert len(groups) == 2 and groups[0] != groups[1]
        assert spg.bundle(1, 1) == (groups[1], 1)
        with pytest.raises(ValueError, match="pg_per_slice=True"):
            spg.placement_group
        seen = manta.get(tpu.dispatch(where, tpu_slice=spg, slice_index=1), timeout=60)
        assert [s["env"]["TPU_WORKER_ID"] for s in seen] == ["0", "1"]
        assert {s["env"]["TPU_NAME"] for s in seen} == {spg.slice_names[1]}
        assert {s["env"]["MEGASCALE_SLICE_ID"] for s in seen} == {"1"}
        with pytest.raises(ValueError, match="Invalid slice_index 2"):
            tpu.dispatch(where, tpu_slice=spg, slice_index=2)


def test_no_free_slice_times_out_with_nothing_left_reserved(free):
    with tpu.slice_placement_group(TOPOLOGY, VERSION, num_slices=2):
        with pytest.raises(RuntimeError, match="DEADLINE_EXCEEDED"):
            tpu.slice_placement_group(TOPOLOGY, VERSION, head_reservation_timeout_s=0.3)
    wait_for(_all_free, 10, "both slices free")


def _host_env(prefix):
    return {k: v for k, v in os.environ.items() if k.startswith(prefix)}


class Host:

    def env(self):
        return _host_env(("TPU_", "MEGASCALE_", "MY_"))


def test_manager_runs_once_per_host_of_each_slice(free):
    tpus = tpu.RayTpuManager.get_available_resources()[POD_TYPE]
    assert {t.name for t in tpus} == SLICE_NAMES and all(isinstance(t, tpu.RayTpu) for t in tpus)
    refs = tpu.TpuManager.remote(tpus, _host_env, True, {"MY_ENV": "x"}, ("TPU_", "MEGASCALE_", "MY_"))
    envs = manta.get(list(refs), timeout=60)
    assert len(envs) == 4
    assert sorted((e["MEGASCALE_SLICE_ID"], e["TPU_WORKER_ID"]) for e in envs) == [("0", "0"), ("0", "1"), ("1", "0"),
                                                                                   ("1", "1")]
    assert all(e["MEGASCALE_NUM_SLICES"] == "2" and e["MY_ENV"] == "x" for e in envs)
    refs.release()
    wait_for(_all_free, 10, "both slices free")

    # Actors: one per host of one slice, holding the host's chips until released.
    actors = tpu.TpuManager.remote(tpus[:1], Host)
    try:
        envs = manta.get([a.env.remote() for a in actors], timeout=60)
        assert [e["TPU_WORKER_ID"] for e in envs] == ["0", "1"]
        assert not any(k.startswith("MEGASCALE_") for e in envs for k in e)
        assert tpu.get_num_ready_tpu_slices(TOPOLOGY, VERSION) == 1
    finally:
        actors.release()


def test_the_slice_example_runs_against_the_cluster(free):
    from test_examples import run_example
    proc = run_example("tpu_slices.py", "--temp-dir", free.temp_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tpu-group-0" in proc.stdout and "tpu-group-1" in proc.stdout
