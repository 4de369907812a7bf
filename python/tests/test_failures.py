"""Failure and process behaviour against a real cluster: crashed workers,
restarted actors, borrowed values whose owner dies, Ctrl-C in get, worker
output at the driver, and a driver that exits leaving nothing of its job
behind."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import manta
from conftest import wait_for
from manta import exceptions


@pytest.fixture(scope="module")
def driver(cluster):
    manta.init(address=cluster.address, _temp_dir=cluster.temp_dir)
    yield cluster
    manta.shutdown()


def _run_driver(cluster, code, timeout=60):
    env = dict(os.environ, MANTA_ADDRESS=cluster.address, MANTA_TOKEN=cluster.token,
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cluster.temp_dir)


def test_a_killed_worker_is_retried_then_reported(driver, tmp_path):
    attempts = tmp_path / "attempts"

    @manta.remote(max_retries=2)
    def die(path):
        with open(path, "a") as f:
            f.write("x")
        os.kill(os.getpid(), signal.SIGKILL)

    with pytest.raises(exceptions.WorkerCrashedError):
        manta.get(die.remote(str(attempts)), timeout=60)
    assert attempts.read_text() == "xxx"  # the first run and two retries


def test_an_actor_restarts_as_max_restarts_says(driver):

    @manta.remote(max_restarts=1)
    class Mortal:

        def pid(self):
            return os.getpid()

        def die(self):
            os.kill(os.getpid(), signal.SIGKILL)

    a = Mortal.remote()
    first = manta.get(a.pid.remote())
    a.die.remote()
    wait_for(lambda: _pid_gone(first), 10, "the actor's first process to die")

    def restarted():
        try:
            return manta.get(a.pid.remote(), timeout=10) != first
        except exceptions.RayActorError:
            return False

    wait_for(restarted, 30, "the actor to restart")
    a.die.remote()

    def died_for_good():
        try:
            manta.get(a.pid.remote(), timeout=10)
            return False  # the call ran before the kill reached it
        except exceptions.ActorDiedError:
            return True

    wait_for(died_for_good, 30, "the actor, out of restarts, to be dead")


def _pid_gone(pid):
    try:
        os.kill(pid, 0)
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split()[2] == "Z"
    except OSError:
        return True


def test_wait_fetch_local_decides_whether_get_still_needs_the_owner(driver):
    """wait(fetch_local=True) counts a borrowed ref ready once its value is
    here, so get needs its owner no more; with fetch_local=False it counts
    once the owner has it, and get must still reach the owner."""

    @manta.remote
    class Owner:

        def make(self):
            # Inside a list, the refs are borrowed by the caller: one small
            # value (inline in replies) and one streamed in chunks.
            return os.getpid(), [manta.put("small"), manta.put(b"x" * (1 << 20))]

    for fetch_local in (True, False):
        owner = Owner.remote()
        pid, refs = manta.get(owner.make.remote(), timeout=60)
        ready, _ = manta.wait(refs, num_returns=2, timeout=30, fetch_local=fetch_local)
        assert ready == refs
        manta.kill(owner)
        wait_for(lambda: _pid_gone(pid), 30, "the owner to die")
        if fetch_local:
            assert manta.get(refs, timeout=30) == ["small", b"x" * (1 << 20)]
        else:
            for ref in refs:
                with pytest.raises(exceptions.OwnerDiedError):
                    manta.get(ref, timeout=30)


def test_ctrl_c_in_get_raises_keyboard_interrupt_within_a_second(driver):

    @manta.remote
    def sleepy():
        time.sleep(30)

    ref = sleepy.remote()
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        manta.get(ref)
    assert time.monotonic() - start < 0.5 + 1.0


def test_worker_output_reaches_the_driver_with_rays_prefix(driver):
    proc = _run_driver(
        driver, """
        import manta
        manta.init()

        @manta.remote
        def hello(i):
            print("hello from task", i)
            return i

        @manta.remote
        class Speaker:
            def say(self):
                print("the same line")

        manta.get([hello.remote(i) for i in range(2)])
        speakers = [Speaker.remote() for _ in range(2)]
        for _ in range(3):
            manta.get([s.say.remote() for s in speakers])
        manta.shutdown()
    """)
    assert proc.returncode == 0, proc.stderr
    assert "(hello pid=" in proc.stdout and ", ip=127.0.0.1) hello from task 0" in proc.stdout
    assert "(Speaker pid=" in proc.stdout
    assert "[repeated" in proc.stdout  # six identical lines from two actors collapse
    assert ":task_name:" not in proc.stdout + proc.stderr


def test_a_driver_that_exits_leaves_nothing_of_its_job_behind(driver):
    proc = _run_driver(
        driver, """
        import os
        import manta
        from manta.util.placement_group import placement_group
        manta.init()

        @manta.remote
        class Holder:
            def pid(self):
                return os.getpid()

        h = Holder.remote()
        pg = placement_group([{"CPU": 1}])
        pg.wait(30)
        print(manta.get(h.pid.remote()), pg.id.hex())
    """)
    assert proc.returncode == 0, proc.stderr
    pid, group = proc.stdout.split()
    wait_for(lambda: _pid_gone(int(pid)), 20, "the exited driver's actor to stop")
    from manta import _core
    wait_for(lambda: _core.get_placement_group(bytes.fromhex(group))["state"] == 3, 20,
             "the exited driver's placement group to be removed")
