"""The core API against a real cluster: a head started for the session
(real GCS, raylet and Python workers), one driver per session."""

import os
import time

import numpy as np
import pytest

import manta
from conftest import PACKAGE_DIR
from manta import exceptions


@pytest.fixture(scope="module")
def driver(cluster):
    manta.init(address=cluster.address, _temp_dir=cluster.temp_dir)
    yield cluster
    manta.shutdown()


@manta.remote
def square(x):
    return x * x


@manta.remote
def add(a, b=0):
    return a + b


@manta.remote(num_returns=3)
def three(x):
    return x, x + 1, x + 2


@manta.remote
def fail(message):
    raise KeyError(message)


@manta.remote
def sleeper(seconds):
    time.sleep(seconds)
    return seconds


@manta.remote
class Counter:

    def __init__(self, start):
        self.n = start

    def incr(self, by=1):
        self.n += by
        return self.n

    def pid(self):
        return os.getpid()

    @manta.method(num_returns=2)
    def pair(self):
        return self.n, -self.n


class Unpicklable:

    def __reduce__(self):
        raise TypeError("not me")


def test_tasks_run_in_workers_and_return(driver):
    assert manta.get([square.remote(i) for i in range(20)]) == [i * i for i in range(20)]
    assert manta.get(add.remote(1, b=2)) == 3


def test_a_ref_argument_arrives_as_its_value(driver):
    ref = square.remote(4)
    assert manta.get(add.remote(ref, b=manta.put(1))) == 17


def test_a_remote_function_already_called_is_captured_by_another(driver):
    # Defined here, both are pickled by value; the driver's call first
    # leaves its own options cached on `child`.
    @manta.remote
    def child(x):
        return x + 1

    @manta.remote
    def parent(x):
        return manta.get(child.remote(x)) * 10

    assert manta.get(child.remote(1)) == 2
    assert manta.get(parent.remote(1)) == 20


def test_num_returns_three_gives_three_refs(driver):
    refs = three.remote(10)
    assert isinstance(refs, list) and len(refs) == 3
    assert manta.get(refs) == [10, 11, 12]


def test_a_task_that_raises_gives_the_caller_its_exception(driver):
    with pytest.raises(KeyError) as info:
        manta.get(fail.remote("gone"))
    assert isinstance(info.value, exceptions.RayTaskError)
    assert "fail" in str(info.value) and "gone" in str(info.value)


def test_actors_keep_state_and_run_calls_in_order(driver):
    c = Counter.remote(10)
    refs = [c.incr.remote() for _ in range(10)]
    assert manta.get(refs) == list(range(11, 21))
    assert manta.get(c.pair.remote()) == [20, -20]
    assert manta.get(c.pid.remote()) != os.getpid()


def test_named_actor_found_by_name_and_killed(driver):
    c = Counter.options(name="named-counter").remote(0)
    manta.get(c.incr.remote())
    found = manta.get_actor("named-counter")
    assert manta.get(found.incr.remote(5)) == 6
    manta.kill(c)
    with pytest.raises(exceptions.RayActorError):
        manta.get(c.incr.remote(), timeout=30)
    with pytest.raises(ValueError):
        manta.get_actor("no-such-actor")


def test_handles_pass_to_tasks(driver):
    c = Counter.remote(100)

    @manta.remote
    def bump(handle):
        return manta.get(handle.incr.remote(1))

    assert manta.get(bump.remote(c)) == 101


def test_put_get_round_trips_values_and_numpy_without_copy(driver):
    value = {"a": [1, 2, 3], "b": "text"}
    assert manta.get(manta.put(value)) == value
    array = np.arange(1 << 20, dtype=np.float64)
    got = manta.get(manta.put(array))
    np.testing.assert_array_equal(got, array)
    assert not got.flags.writeable  # a view of the stored bytes, as Ray's
    with pytest.raises(TypeError):
        manta.put(manta.put(1))


def test_owned_ready_values_are_read_in_one_call_and_the_rest_left_to_get(driver):
    from manta import _core
    for v in [0, -2**63, 1.5, "é", b"x", None, True, (1, "x"), {"k": [2]}]:
        ref = manta.put(v)
        got = _core.get_ready(ref)
        assert got == v and type(got) is type(v)
    done = square.remote(3)
    assert manta.get(done) == 9 and _core.get_ready(done) == 9  # a task's return, held here now
    failed = fail.remote("boom")
    manta.wait([failed])
    assert _core.get_ready(failed) is _core.MISS  # an error: get() raises it
    with pytest.raises(KeyError):
        manta.get(failed)
    pending = sleeper.remote(0.5)
    assert _core.get_ready(pending) is _core.MISS  # not ready: get() waits
    assert manta.get(pending) == 0.5
    assert _core.get_ready(manta.put(np.arange(3))) is _core.MISS  # out-of-band buffers: get() maps them


def test_nested_refs_are_borrowed_and_keep_the_object_alive(driver):
    inner = manta.put("inner value")
    outer = manta.put([inner])
    del inner

    @manta.remote
    def read(box):
        return manta.get(box[0])

    assert manta.get(read.remote(outer)) == "inner value"
    assert manta.get(manta.get(outer)[0]) == "inner value"


def test_wait_returns_ready_first_and_respects_timeout(driver):

    @manta.remote
    def slow(s):
        time.sleep(s)
        return s

    a, b, c = slow.remote(0), slow.remote(0), slow.remote(0)
    manta.get([a, b, c])
    fast, slower = slow.remote(0), slow.remote(30)
    ready, not_ready = manta.wait([slower, fast], num_returns=1, timeout=20)
    assert ready == [fast] and not_ready == [slower]
    ready, not_ready = manta.wait([slower], timeout=0.2)
    assert ready == [] and not_ready == [slower]
    with pytest.raises(exceptions.GetTimeoutError):
        manta.get(slower, timeout=0.2)
    with pytest.raises(ValueError):
        manta.wait([fast, fast])
    with pytest.raises(TypeError):
        manta.wait([fast, 3])
    # The first num_returns ready, in the order given; the rest keep theirs.
    ready, not_ready = manta.wait([slower, c, a, b], num_returns=2, timeout=20)
    assert ready == [c, a] and not_ready == [slower, b]
    with pytest.raises(ValueError):
        manta.wait([fast], num_returns=2)
    # Long lists: ready refs early in the list are found without the rest,
    # one far in still is, and a duplicate anywhere is refused.
    held = [manta.put(i) for i in range(100)]
    ready, not_ready = manta.wait(held[:3] + [slower] + held[3:], num_returns=3, timeout=20)
    assert ready == held[:3] and not_ready == [slower] + held[3:]
    late = [slower] + [add.remote(slower) for _ in range(69)] + [a]  # waiting on slower's value
    ready, not_ready = manta.wait(late, num_returns=1, timeout=20)
    assert ready == [a] and not_ready == late[:-1]
    for r in late[1:-1]:
        manta.cancel(r)
    with pytest.raises(ValueError, match="unique"):
        manta.wait(held + [held[80]])


def test_env_vars_reach_os_environ(driver):

    @manta.remote
    def read(name):
        return os.environ.get(name)

    with_var = read.options(runtime_env={"env_vars": {"MANTA_TEST_VAR": "on"}})
    for _ in range(2):
        assert manta.get([with_var.remote("MANTA_TEST_VAR") for _ in range(4)]) == ["on"] * 4
        # The workers that ran those restored their environment, os.environ too.
        assert manta.get([read.remote("MANTA_TEST_VAR") for _ in range(8)]) == [None] * 8


def test_bad_use_is_refused_clearly(driver):
    with pytest.raises(TypeError, match="cannot be called directly"):
        square(1)
    with pytest.raises(TypeError, match="cannot be pickled"):
        square.remote(Unpicklable())
    with pytest.raises(ValueError, match="Invalid option keyword"):
        square.options(bogus=1)
    with pytest.raises(ValueError, match="not supported"):
        square.options(num_returns="dynamic")
    with pytest.raises(ValueError, match="pip"):
        square.options(runtime_env={"pip": ["x"]})
    with pytest.raises(RuntimeError, match="twice"):
        manta.init(address=driver.address)
    manta.init(address=driver.address, ignore_reinit_error=True)
    with pytest.raises(ValueError, match="ray://"):
        manta.shutdown.__module__ and manta._private.api._resolve_address("ray://host:10001")


def test_cluster_tables(driver):
    nodes = manta.nodes()
    assert len(nodes) == 1 and nodes[0]["Alive"]
    assert manta.cluster_resources()["CPU"] == 4
    # As Ray's, a resource of which nothing is free is left out; the
    # module's earlier tests may still hold every CPU.
    available = manta.available_resources()
    assert 0 < available.get("CPU", 1) <= 4
    assert all(v > 0 for v in available.values())


class Flaky(Exception):
    pass


def test_retry_exceptions_retries_listed_errors_only(driver, tmp_path):

    @manta.remote(max_retries=2, retry_exceptions=[Flaky])
    def flaky(path, error):
        with open(path, "a") as f:
            f.write("x")
        raise error("again")

    listed, other = tmp_path / "listed", tmp_path / "other"
    with pytest.raises(Flaky):
        manta.get(flaky.remote(str(listed), Flaky))
    with pytest.raises(ValueError):
        manta.get(flaky.remote(str(other), ValueError))
    assert listed.read_text() == "xxx" and other.read_text() == "x"

    @manta.remote(max_retries=1, retry_exceptions=True)
    def any_error(path):
        with open(path, "a") as f:
            f.write("x")
        raise KeyError("k")

    anything = tmp_path / "any"
    with pytest.raises(KeyError):
        manta.get(any_error.remote(str(anything)))
    assert anything.read_text() == "xx"
    with pytest.raises(TypeError, match="retry_exceptions"):
        any_error.options(retry_exceptions=["not a class"])


def test_runtime_context_names_the_task_actor_and_resources(driver):
    ctx = manta.get_runtime_context()
    assert ctx.get_task_id() is None and ctx.get_actor_id() is None
    assert len(ctx.get_job_id()) == 8 and len(ctx.get_node_id()) == 56

    @manta.remote(num_cpus=2)
    def inside():
        c = manta.get_runtime_context()
        return c.get_task_id(), c.get_actor_id(), c.get_assigned_resources(), c.get_job_id()

    task_id, actor_id, resources, job = manta.get(inside.remote())
    assert task_id and actor_id is None and resources.get("CPU") == 2.0 and job == ctx.get_job_id()

    @manta.remote
    class Who:

        def ids(self):
            c = manta.get_runtime_context()
            return c.get_actor_id(), c.get_task_id()

    actor_id, task_id = manta.get(Who.remote().ids.remote())
    assert actor_id and task_id


def test_max_concurrency_runs_calls_at_once(driver):

    @manta.remote(max_concurrency=2)
    class Meeting:

        def __init__(self):
            import threading
            self.arrived = 0
            self.lock = threading.Condition()

        def meet(self):
            # Returns True only when another call is inside at the same time.
            with self.lock:
                self.arrived += 1
                self.lock.notify_all()
                return self.lock.wait_for(lambda: self.arrived >= 2, timeout=20)

    m = Meeting.remote()
    assert manta.get([m.meet.remote(), m.meet.remote()], timeout=60) == [True, True]


def test_labels_and_resources_decide_where_tasks_may_run(start_cluster):
    import subprocess
    import sys
    import textwrap
    cluster = start_cluster(num_cpus=2, extra_args=["--labels", "zone=a", "--resources", '{"disk": 1}'])
    proc = subprocess.run([
        sys.executable, "-c",
        textwrap.dedent("""
        import manta
        manta.init()

        @manta.remote
        def where():
            return "ran"

        print(manta.get(where.options(label_selector={"zone": "a"}).remote(), timeout=30))
        print(manta.get(where.options(resources={"disk": 1}).remote(), timeout=30))
        for ref in (where.options(label_selector={"zone": "b"}).remote(),
                    where.options(resources={"disk": 2}).remote()):
            ready, _ = manta.wait([ref], timeout=1)
            print("waiting" if not ready else "ran")
    """)
    ], capture_output=True, text=True, timeout=60, cwd=cluster.temp_dir,
                          env=dict(os.environ, MANTA_ADDRESS=cluster.address, MANTA_TOKEN=cluster.token,
                                   PYTHONPATH=PACKAGE_DIR))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["ran", "ran", "waiting", "waiting"]


def test_the_gcs_refuses_a_function_under_another_name(driver):
    import hashlib
    from manta import _core
    blob = b"not what the name says"
    with pytest.raises(ValueError, match="does not match its content"):
        _core.kv_put(_core.FUNCTION_KV_NAMESPACE, hashlib.sha256(b"other").hexdigest().encode(), blob, True)
    assert _core.kv_put(_core.FUNCTION_KV_NAMESPACE, hashlib.sha256(blob).hexdigest().encode(), blob, False)


def test_get_if_exists_returns_the_named_actor(driver):
    first = Counter.options(name="shared-counter", get_if_exists=True).remote(0)
    manta.get(first.incr.remote(3))
    again = Counter.options(name="shared-counter", get_if_exists=True).remote(100)
    assert manta.get(again.incr.remote(1)) == 4  # the same actor, not a new one at 100
    with pytest.raises(ValueError, match="is taken"):
        Counter.options(name="shared-counter").remote(0)


def test_functions_and_classes_run_on_the_next_cluster_joined(tmp_path):
    import subprocess
    import sys
    import textwrap
    # Exported to the first cluster, then to the second after shutdown.
    code = textwrap.dedent("""
        import manta

        @manta.remote
        def inc(x):
            return x + 1

        @manta.remote
        class Box:
            def get(self, x):
                return x

        for _ in range(2):
            manta.init(num_cpus=1)
            print(manta.get(inc.remote(1), timeout=60), manta.get(Box.remote().get.remote(5), timeout=60))
            manta.shutdown()
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("MANTA_ADDRESS", "RAY_ADDRESS")}
    env["PYTHONPATH"] = PACKAGE_DIR
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(tmp_path),
                          env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2", "5", "2", "5"]
