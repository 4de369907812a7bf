"""Where tasks and actors run, on a real two-node cluster: SPREAD over
distinct nodes, node affinity on the named one (hard and soft), and
cancel ending a running task (and the tasks it submitted) and giving its
CPU back."""

import os
import time

import pytest

import manta
from conftest import free_port, wait_for
from manta import exceptions
from manta.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    from conftest import start_head, stop_head
    cluster = start_head(num_cpus=2)
    try:
        proc = cluster.manta(
            ["start", "--address", cluster.address, "--num-cpus", "2", f"--metrics-export-port={free_port()}"])
        assert proc.returncode == 0, proc.stderr
        manta.init(address=cluster.address, _temp_dir=cluster.temp_dir)
        wait_for(lambda: len([n for n in manta.nodes() if n["Alive"]]) == 2, 30, "two nodes")
        yield cluster
    finally:
        manta.shutdown()
        stop_head(cluster)


@manta.remote
def node_of(hold_s=0.0):
    time.sleep(hold_s)
    return manta.get_runtime_context().get_node_id()


def test_spread_puts_tasks_on_distinct_nodes(two_nodes):
    refs = [node_of.options(scheduling_strategy="SPREAD").remote(1.0) for _ in range(2)]
    assert len(set(manta.get(refs, timeout=60))) == 2


def test_node_affinity_runs_on_the_named_node(two_nodes):
    nodes = [n["NodeID"] for n in manta.nodes() if n["Alive"]]
    for node in nodes:
        hard = NodeAffinitySchedulingStrategy(node, soft=False)
        assert set(manta.get([node_of.options(scheduling_strategy=hard).remote() for _ in range(4)],
                             timeout=60)) == {node}
    dead = "ab" * 28
    with pytest.raises(exceptions.TaskUnschedulableError):
        manta.get(
            node_of.options(scheduling_strategy=NodeAffinitySchedulingStrategy(dead, soft=False)).remote(), timeout=30)
    soft = NodeAffinitySchedulingStrategy(dead, soft=True)
    assert manta.get(node_of.options(scheduling_strategy=soft).remote(), timeout=30) in nodes
    with pytest.raises(ValueError, match="not a hex id"):
        node_of.options(scheduling_strategy=NodeAffinitySchedulingStrategy("zz", soft=False)).remote()


def test_actors_follow_node_affinity(two_nodes):

    @manta.remote
    class Where:

        def node(self):
            return manta.get_runtime_context().get_node_id()

    for node in [n["NodeID"] for n in manta.nodes() if n["Alive"]]:
        a = Where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
        assert manta.get(a.node.remote(), timeout=60) == node


def spin(path):
    """Marks `path`, then spins until cancelled (marking path.cancelled) or
    told to stop by path.stop (marking path.finished)."""
    open(path, "w").close()
    try:
        while not os.path.exists(path + ".stop"):
            time.sleep(0.01)
    except KeyboardInterrupt:
        open(path + ".cancelled", "w").close()
        raise
    open(path + ".finished", "w").close()


spin_child = manta.remote(spin)


@manta.remote
def wait_for_child(path):
    return manta.get(spin_child.remote(path))


def test_cancel_ends_the_tasks_a_task_submitted_unless_not_recursive(two_nodes, tmp_path):

    def all_cpus_free():
        return manta.available_resources().get("CPU", 0) == manta.cluster_resources()["CPU"]

    def cancel_parent(name, **options):
        path = str(tmp_path / name)
        parent = wait_for_child.remote(path)
        wait_for(lambda: os.path.exists(path), 30, "the child to start")
        manta.cancel(parent, **options)
        with pytest.raises(exceptions.TaskCancelledError):
            manta.get(parent, timeout=30)
        return path

    # Recursive, Ray's default: the child the parent waits for ends too.
    path = cancel_parent("recursive")
    wait_for(lambda: os.path.exists(path + ".cancelled"), 30, "the child to be cancelled")
    wait_for(all_cpus_free, 30, "every CPU back")
    # Forced: the child's worker is killed with its parent's.
    path = cancel_parent("forced", force=True)
    wait_for(all_cpus_free, 30, "every CPU back after a forced cancel")
    # Not recursive: the child runs on, holding its CPU, to its own end.
    path = cancel_parent("alone", recursive=False)
    assert manta.available_resources().get("CPU", 0) < manta.cluster_resources()["CPU"]
    open(path + ".stop", "w").close()
    wait_for(lambda: os.path.exists(path + ".finished"), 30, "the child to run on to its end")
    assert not os.path.exists(path + ".cancelled")
    wait_for(all_cpus_free, 30, "every CPU back once the child ended")


@manta.remote
def cancel_borrowed(refs, force=False):
    """Cancels the task of refs[0], which it borrows (the driver owns it)."""
    manta.cancel(refs[0], force=force)


@manta.remote
class Napper:

    def nap(self, path):
        return spin(path)


def test_a_borrower_cancels_through_the_owner(two_nodes, tmp_path):
    path = str(tmp_path / "borrowed")
    ref = spin_child.remote(path)
    wait_for(lambda: os.path.exists(path), 30, "the task to start")
    manta.get(cancel_borrowed.remote([ref]), timeout=30)
    with pytest.raises(exceptions.TaskCancelledError):
        manta.get(ref, timeout=30)
    assert os.path.exists(path + ".cancelled")

    # The owner's refusal reaches the borrower: actor calls cannot be forced.
    napper = Napper.remote()
    path = str(tmp_path / "actor-call")
    call = napper.nap.remote(path)
    wait_for(lambda: os.path.exists(path), 30, "the actor call to start")
    with pytest.raises(ValueError, match="force"):
        manta.get(cancel_borrowed.remote([call], force=True), timeout=30)
    manta.get(cancel_borrowed.remote([call]), timeout=30)
    with pytest.raises(exceptions.TaskCancelledError):
        manta.get(call, timeout=30)
    assert os.path.exists(path + ".cancelled")
    manta.kill(napper)


def test_cancel_drops_queued_interrupts_running_and_force_kills(two_nodes):

    @manta.remote
    def spin():
        n = 0
        while True:
            n += 1

    @manta.remote
    def sleep_long():
        time.sleep(120)

    queued = spin.options(resources={"no-such-resource": 1}).remote()
    manta.cancel(queued)
    with pytest.raises(exceptions.TaskCancelledError):
        manta.get(queued, timeout=30)

    running = spin.remote()
    manta.wait([running], timeout=1)  # let it start
    manta.cancel(running)
    with pytest.raises(exceptions.TaskCancelledError):
        manta.get(running, timeout=30)

    node = [n["NodeID"] for n in manta.nodes() if n["Alive"]][0]
    there = NodeAffinitySchedulingStrategy(node, soft=False)
    stuck = sleep_long.options(scheduling_strategy=there).remote()
    manta.wait([stuck], timeout=1)
    manta.cancel(stuck, force=True)
    with pytest.raises(exceptions.TaskCancelledError):
        manta.get(stuck, timeout=30)
    # Both of the node's CPUs are free again: a task that needs both runs there.
    assert manta.get(node_of.options(num_cpus=2, scheduling_strategy=there).remote(), timeout=30) == node
    with pytest.raises(TypeError):
        manta.cancel("not a ref")
