"""manta.train against a simulated TPU cluster: `manta up --tpu v6e-16
--slices 2` (a head and 8 hosts: two 4x4 slices of 4 hosts with 4 chips
each). A Python loop runs in Python workers under the C++ controller; the
tests read back what each rank saw from files it writes under the run's
storage path."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from conftest import PACKAGE_DIR, REPO_DIR, start_tpu_cluster, stop_head, wait_for

train = pytest.importorskip("manta.train")
import manta  # noqa: E402
from manta.train import Checkpoint, JaxTrainer  # noqa: E402
from manta.train.v2.api.config import FailureConfig, RunConfig, ScalingConfig  # noqa: E402
from manta._private import local_cluster  # noqa: E402
from manta.util import tpu  # noqa: E402

TOPOLOGY, ACCELERATOR, POD_TYPE = "4x4", "TPU-V6E", "v6e-16"


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
    return tpu.get_num_ready_tpu_slices(TOPOLOGY, "v6e") == 2


@pytest.fixture
def free(driver):
    """Every test starts and ends with both slices free."""
    wait_for(_all_free, 30, "both slices to be free")
    yield driver
    wait_for(_all_free, 30, "both slices to be free again")


def _scaling(num_workers):
    return ScalingConfig(use_tpu=True, num_workers=num_workers, topology=TOPOLOGY, accelerator_type=ACCELERATOR,
                         resources_per_worker={"TPU": 4}, placement_strategy="SPREAD")


def _seen(storage, name):
    """What each rank wrote: [(attempt, rank, record), ...]."""
    out = []
    d = os.path.join(storage, "seen")
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        with open(os.path.join(d, f)) as fh:
            out.append(json.load(fh))
    return out


ENV_KEYS = ("JAX_COORDINATOR_ADDRESS", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES", "JAX_PLATFORMS", "TPU_WORKER_ID",
            "TPU_WORKER_HOSTNAMES", "TPU_ACCELERATOR_TYPE", "MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_NUM_SLICES",
            "MEGASCALE_SLICE_ID", "MY_SETTING")


def checkpointing_loop(config):
    """Three steps with a checkpoint each; rank 5 dies after the second
    step of the first attempt."""
    ctx = train.get_context()
    rank = ctx.get_world_rank()
    start = 0
    restored = train.get_checkpoint()
    if restored is not None:
        with restored.as_directory() as d, open(os.path.join(d, "rank_%d" % rank)) as f:
            start = int(f.read()) + 1
    record = {
        "attempt": ctx.get_attempt_number(), "rank": rank, "size": ctx.get_world_size(),
        "local_rank": ctx.get_local_rank(), "node_rank": ctx.get_node_rank(), "name": ctx.get_experiment_name(),
        "storage": ctx.get_storage_path(), "cwd": os.getcwd(), "restored": restored.path if restored else None,
        "start": start, "pid": os.getpid(), "env": {k: os.environ.get(k) for k in ENV_KEYS}
    }
    os.makedirs(os.path.join(config["out"], "seen"), exist_ok=True)
    with open(os.path.join(config["out"], "seen", "a%d_r%d.json" % (record["attempt"], rank)), "w") as f:
        json.dump(record, f)
    for step in range(start, config["steps"]):
        # Under the test's folder: a worker killed mid-step leaves it there.
        with tempfile.TemporaryDirectory(prefix="ckpt_", dir=config["out"]) as local:  # report() keeps a copy
            with open(os.path.join(local, "rank_%d" % rank), "w") as f:
                f.write(str(step))
            train.report({"step": step, "loss": 1.0 / (step + 1)}, checkpoint=Checkpoint.from_directory(local))
        if ctx.get_attempt_number() == 1 and rank == 5 and step == 1:
            os.kill(os.getpid(), signal.SIGKILL)


def test_python_loop_on_two_slices_checkpoints_and_restarts(free, tmp_path):
    storage = str(tmp_path)
    trainer = JaxTrainer(
        checkpointing_loop, train_loop_config={"steps": 3, "out": storage}, scaling_config=_scaling(8),
        run_config=RunConfig(name="pyloop", storage_path=storage, failure_config=FailureConfig(max_failures=1),
                             worker_runtime_env={"env_vars": {"MY_SETTING": "on"}}))
    result = trainer.fit()
    run_dir = os.path.join(storage, "pyloop")
    assert result.path == run_dir
    assert result.metrics["step"] == 2 and result.num_failures == 1
    assert result.checkpoint is not None and os.path.dirname(result.checkpoint.path) == run_dir
    assert sorted(os.listdir(result.checkpoint.path)) == ["rank_%d" % r for r in range(8)]
    seen = _seen(storage, "pyloop")
    first = [s for s in seen if s["attempt"] == 1]
    second = [s for s in seen if s["attempt"] == 2]
    assert sorted(s["rank"] for s in first) == list(range(8)) == sorted(s["rank"] for s in second)
    for s in first + second:
        env = s["env"]
        assert s["size"] == 8 and s["name"] == "pyloop" and s["storage"] == run_dir
        assert env["JAX_PROCESS_ID"] == str(s["rank"]) and env["JAX_NUM_PROCESSES"] == "8"
        assert env["JAX_COORDINATOR_ADDRESS"] and env["JAX_PLATFORMS"]
        assert env["TPU_WORKER_ID"] == str(s["rank"] % 4) and env["TPU_ACCELERATOR_TYPE"] == POD_TYPE
        assert env["MEGASCALE_NUM_SLICES"] == "2" and env["MEGASCALE_SLICE_ID"] == str(s["rank"] // 4)
        assert env["MY_SETTING"] == "on"
    assert all(s["restored"] is None and s["start"] == 0 for s in first)
    # The second attempt started from the copy in the run's directory of the
    # step every rank reported before rank 5 died.
    assert {s["restored"] for s in second} == {os.path.join(run_dir, "checkpoint_000001")}
    assert {s["start"] for s in second} == {2}


def failing_loop():
    if train.get_context().get_world_rank() == 2:
        raise KeyError("no such shard")
    train.report({"ok": 1})


def test_a_failing_loop_raises_with_the_workers_traceback(free, tmp_path):
    trainer = JaxTrainer(failing_loop, scaling_config=_scaling(4),
                         run_config=RunConfig(name="fails", storage_path=str(tmp_path)))
    with pytest.raises(train.TrainingFailedError) as info:
        trainer.fit()
    e = info.value
    assert isinstance(e, train.WorkerGroupError)
    assert list(e.worker_failures) == [2]
    assert isinstance(e.worker_failures[2], KeyError)
    text = str(e)
    assert "no such shard" in text and "failing_loop" in text and "test_train.py" in text
    # An elastic run carries the loop's own exception too.
    elastic = JaxTrainer(failing_loop, scaling_config=_scaling((4, 8)),
                         run_config=RunConfig(name="fails_elastic", storage_path=str(tmp_path)))
    with pytest.raises(train.WorkerGroupError) as info:
        elastic.fit()
    assert list(info.value.worker_failures) == [2]
    assert isinstance(info.value.worker_failures[2], KeyError)
    assert "failing_loop" in str(info.value)


def test_bad_input_is_refused_before_anything_is_reserved(free, tmp_path):
    run = RunConfig(name="bad", storage_path=str(tmp_path))

    def fit(loop=failing_loop, config=None, scaling=None, run_config=run):
        return JaxTrainer(loop, train_loop_config=config, scaling_config=scaling or _scaling(4),
                          run_config=run_config).fit()

    with pytest.raises(TypeError, match="callable"):
        fit(loop=42)
    with pytest.raises(TypeError, match="train_loop_config cannot be pickled"):
        fit(loop=checkpointing_loop, config={"lock": threading.Lock()})
    with pytest.raises(ValueError, match="not a whole number of v6e-16 slices"):
        fit(scaling=_scaling(6))
    with pytest.raises(ValueError, match="4x4x4"):
        fit(scaling=ScalingConfig(use_tpu=True, num_workers=4, topology="4x4x4", accelerator_type=ACCELERATOR))
    with pytest.raises(ValueError, match="finite"):
        fit(scaling=ScalingConfig(num_workers=1, resources_per_worker={"CPU": float("nan")}))
    with pytest.raises(ValueError, match="label_selector: a slice is chosen whole"):
        fit(scaling=ScalingConfig(use_tpu=True, num_workers=4, topology=TOPOLOGY, accelerator_type=ACCELERATOR,
                                  label_selector={"manta.io/tpu-worker-id": "0"}))
    with pytest.raises(ValueError, match="gs://bucket/runs"):
        fit(run_config=RunConfig(name="bad", storage_path="gs://bucket/runs"))
    assert _all_free()


def where_loop(config):
    with open(os.path.join(config["out"], "rank%d" % train.get_context().get_world_rank()), "w") as f:
        f.write(os.environ.get("TPU_NAME", ""))


def test_label_selector_places_the_workers(free, tmp_path):
    out = str(tmp_path)
    JaxTrainer(
        where_loop, train_loop_config={"out": out},
        scaling_config=ScalingConfig(num_workers=2, resources_per_worker={"CPU": 1},
                                     label_selector={"manta.io/tpu-slice-name": "tpu-group-1"}),
        run_config=RunConfig(name="selected", storage_path=out)).fit()
    for rank in range(2):
        with open(os.path.join(out, "rank%d" % rank)) as f:
            assert f.read() == "tpu-group-1"
    # With use_tpu, only a slice whose hosts match is reserved.
    slice_scaling = ScalingConfig(use_tpu=True, num_workers=4, topology=TOPOLOGY, accelerator_type=ACCELERATOR,
                                  label_selector={"manta.io/tpu-slice-name": "!tpu-group-0"})
    JaxTrainer(where_loop, train_loop_config={"out": out}, scaling_config=slice_scaling,
               run_config=RunConfig(name="selected_slice", storage_path=out)).fit()
    for rank in range(4):
        with open(os.path.join(out, "rank%d" % rank)) as f:
            assert f.read() == "tpu-group-1"


CTRL_C_DRIVER = """
import os, sys, time
import manta
from manta import train
from manta.train import JaxTrainer, RunConfig, ScalingConfig

def loop(config):
    while True:
        train.report({"alive": 1})
        if train.get_context().get_world_rank() == 0:
            open(os.path.join(config["out"], "running"), "w").close()
        time.sleep(0.1)

manta.init()
JaxTrainer(loop, train_loop_config={"out": sys.argv[1]}, scaling_config=ScalingConfig(use_tpu=True, num_workers=4, topology="4x4",
                                              accelerator_type="TPU-V6E"),
           run_config=RunConfig(name="interrupted", storage_path=sys.argv[1])).fit()
"""


def _train_workers(temp_dir):
    """Pids of the cluster's processes that run a training loop's actor."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"manta._worker" in cmd and temp_dir.encode() in env and b"JAX_PROCESS_ID" in env:
            pids.append(int(entry))
    return pids


def test_ctrl_c_in_the_driver_gives_the_slice_back(free, tmp_path):
    env = dict({k: v for k, v in os.environ.items() if not k.startswith("MANTA_")}, MANTA_ADDRESS=free.address,
               PYTHONPATH=PACKAGE_DIR, MANTA_TOKEN=_token(free))
    driver = subprocess.Popen([sys.executable, "-c", CTRL_C_DRIVER, str(tmp_path)], env=env, cwd=str(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: os.path.exists(tmp_path / "running") or driver.poll() is not None, 60, "the loop")
        assert driver.poll() is None, driver.stdout.read()
        assert not _all_free()
        driver.send_signal(signal.SIGINT)
        out, _ = driver.communicate(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert "KeyboardInterrupt" in out, out
    wait_for(_all_free, 30, "the slice to be given back")
    wait_for(lambda: not _train_workers(free.temp_dir), 30, "the loop's workers to exit")


# ---- elastic: 8 -> 4 -> 8 workers as a host dies and returns ----------------------

_STARTS = [0]  # module state of the worker process: survives a resize only if the process does


def elastic_loop(config):
    _STARTS[0] += 1
    ctx = train.get_context()
    restored = train.get_checkpoint()
    start = 0
    if restored is not None:
        with open(os.path.join(restored.path, "rank_0")) as f:
            start = int(f.read()) + 1
    out = config["out"]
    os.makedirs(os.path.join(out, "seen"), exist_ok=True)
    record = {
        "pid": os.getpid(), "starts": _STARTS[0], "rank": ctx.get_world_rank(), "size": ctx.get_world_size(),
        "slice": ctx.get_slice_id(), "start": start,
        "host": os.environ.get("TPU_NAME", "") + "/" + os.environ.get("TPU_WORKER_ID", ""),
        "restored": restored.path if restored else None, "process_id": os.environ.get("JAX_PROCESS_ID")
    }
    with open(os.path.join(out, "seen", "%d_%d.json" % (os.getpid(), _STARTS[0])), "w") as f:
        json.dump(record, f)
    step = start
    while not (step >= 4 and os.path.exists(os.path.join(out, "stop"))):
        with tempfile.TemporaryDirectory(prefix="ckpt_", dir=out) as local:  # report() keeps a copy
            with open(os.path.join(local, "rank_%d" % ctx.get_world_rank()), "w") as f:
                f.write(str(step))
            train.report({"step": step, "world_size": ctx.get_world_size()},
                         checkpoint=Checkpoint.from_directory(local))
        if ctx.get_world_rank() == 0:
            with open(os.path.join(out, "progress.tmp"), "w") as f:
                json.dump({"step": step, "size": ctx.get_world_size()}, f)
            os.replace(os.path.join(out, "progress.tmp"), os.path.join(out, "progress"))
        step += 1
        time.sleep(0.2)


def _children(pid):
    out = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _progress(out):
    try:
        with open(os.path.join(out, "progress")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def test_elastic_python_loop_shrinks_and_grows_keeping_survivor_processes(free, tmp_path):
    out = str(tmp_path)
    trainer = JaxTrainer(
        elastic_loop, train_loop_config={"out": out}, scaling_config=_scaling((4, 8)),
        run_config=RunConfig(name="elastic", storage_path=out, failure_config=FailureConfig(max_failures=0)))
    box = {}
    fit = threading.Thread(target=lambda: box.update(result=_try(trainer.fit)))
    fit.start()
    try:
        wait_for(lambda: (_progress(out) or {}).get("step", -1) >= 3, 120, "three steps on 8 workers")
        pid, env = local_cluster.raylet_of(free.temp_dir, "tpu-group-1", 2)
        victims = [pid] + _children(pid)
        for p in victims:
            os.kill(p, signal.SIGKILL)
        wait_for(lambda: (_progress(out) or {}).get("size") == 4, 120, "the group to shrink to 4")
        at_four = _progress(out)["step"]
        wait_for(lambda: _progress(out)["step"] >= at_four + 2, 60, "two steps on 4 workers")
        host_env = {k: v for k, v in env.items() if k.startswith(("TPU_", "MEGASCALE_", "PATH", "HOME"))}
        subprocess.run([
            os.path.join(free.bin_dir, "manta"), "start", f"--address={free.address}", f"--temp-dir={free.temp_dir}",
            "--num-cpus=1"
        ], env=host_env, cwd=free.temp_dir, check=True, capture_output=True, timeout=60)
        wait_for(lambda: (_progress(out) or {}).get("size") == 8, 120, "the group to grow back to 8")
        at_eight = _progress(out)["step"]
        wait_for(lambda: _progress(out)["step"] >= at_eight + 2, 60, "two steps on 8 workers again")
    finally:
        open(os.path.join(out, "stop"), "w").close()
        fit.join(120)
    result = box["result"]
    assert not isinstance(result, BaseException), result
    assert result.num_failures == 0 and result.metrics["world_size"] == 8
    seen = _seen(out, "elastic")
    sizes = [s["size"] for s in sorted(seen, key=lambda s: (s["starts"], s["pid"]))]
    assert {8, 4} <= set(sizes)
    # The survivors (slice tpu-group-0) ran every group in the same process,
    # its module state intact: one pid per host, its loop started 3 times.
    survivors = [s for s in seen if s["host"].startswith("tpu-group-0/")]
    by_host = {}
    for s in survivors:
        by_host.setdefault(s["host"], set()).add(s["pid"])
    assert len(by_host) == 4 and all(len(p) == 1 for p in by_host.values()), by_host
    assert sorted(s["starts"] for s in survivors if s["host"] == "tpu-group-0/0") == [1, 2, 3]
    # Each re-formed group started from the latest committed checkpoint.
    for s in seen:
        if s["restored"]:
            assert s["start"] >= 1 and os.path.dirname(s["restored"]) == os.path.join(out, "elastic")


def _try(f):
    try:
        return f()
    except BaseException as e:  # noqa: BLE001 - reported by the test
        return e


# ---- the kernels' MaxText loop from Python: the tutorial scripts as jobs ----------

BASE_CONFIG = os.path.join(REPO_DIR, "train", "kernels", "configs", "base.yml")


def _tiny_args(data, run, steps, *extra):
    return [
        "base.yml", "model_name=tiny",
        "steps=%d" % steps, "per_device_batch_size=1", "ici_fsdp_parallelism=4", "ici_tensor_parallelism=4",
        "base_output_directory=" + data, "run_name=" + run,
        "metrics_file=%s/%s.jsonl" % (data, run), *extra
    ]


def _submit(cluster, script, args, tmp_path):
    """`manta job submit --working-dir` of an example script; the CompletedProcess."""
    work = tmp_path / "job"
    work.mkdir()
    shutil.copy(os.path.join(REPO_DIR, "examples", "python", script), work / script)
    shutil.copy(BASE_CONFIG, work / "base.yml")
    runtime_env = json.dumps({"env_vars": {"PYTHONPATH": PACKAGE_DIR, "HOME": str(tmp_path)}})
    with open(os.path.join(cluster.session_dir, "dashboard_address")) as f:
        dashboard = f.read().strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MANTA_")}
    return subprocess.run([
        os.path.join(cluster.bin_dir,
                     "manta"), "job", "submit", f"--address={dashboard}", f"--temp-dir={cluster.temp_dir}",
        f"--working-dir={work}", f"--runtime-env-json={runtime_env}", "--", sys.executable, script, *args
    ], capture_output=True, text=True, timeout=300, env=env)


def _losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def test_the_tutorial_script_trains_the_kernels_as_a_job(free, tmp_path):
    data = str(tmp_path / "data")
    r = _submit(free, "maxtext_ray_trainer.py", _tiny_args(data, "py4x4", 6), tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "[State Transition] SCHEDULING -> RUNNING." in out
    assert "Using SlicePlacementGroup utility to reserve 1 slice(s) with topology '4x4'..." in out
    assert re.search(
        r"\(TrainWorker pid=\d+, ip=[0-9.]+\) completed step: \d+, seconds: [0-9.]+, TFLOP/s/device: "
        r"[0-9.]+, Tokens/s/device: [0-9.]+, total_weights: \d+, loss: [0-9.]+ \[repeated \d+x "
        r"across cluster\]", out), out
    assert re.search(r"Job '[^']+' succeeded", out), out
    assert "Training finished: final loss" in out
    assert len(_losses(os.path.join(data, "py4x4.jsonl"))) == 6


def _lines(path):
    """(step, loss) of every line of a metrics file (a redone step twice)."""
    try:
        with open(path) as f:
            return [(j["step"], j["loss"]) for j in map(json.loads, filter(str.strip, f))]
    except (OSError, ValueError):
        return []


def _token(cluster):
    with open(os.path.join(cluster.session_dir, "token")) as f:
        return f.read().strip()


def _group_size(cluster):
    r = subprocess.run([
        os.path.join(cluster.bin_dir, "manta"), "list", "train-runs", "--format", "json",
        f"--temp-dir={cluster.temp_dir}"
    ], capture_output=True, text=True, timeout=30)
    try:
        runs = json.loads(r.stdout)
    except ValueError:
        return -1
    if not runs or runs[-1]["status"] != "RUNNING" or not runs[-1]["attempts"]:
        return -1
    return len(runs[-1]["attempts"][-1]["workers"])


def test_the_kernels_from_python_resize_8_4_8_and_train_the_unresized_model(free, tmp_path):
    data = str(tmp_path / "data")
    # Enough steps that the run is still going when the slice is back: under
    # load a step on 4 workers can take 0.2 s and the grow 4 s to decide.
    args = _tiny_args(data, "elastic", 60, "enable_checkpointing=true", "checkpoint_period=5")
    args[0] = BASE_CONFIG
    # The same config unresized: 8 processes of 4 devices over 2 slices.
    reference_args = [
        a.replace("run_name=elastic", "run_name=unresized").replace("elastic.jsonl", "unresized.jsonl") for a in args
    ]
    local = subprocess.run([
        os.path.join(free.bin_dir, "manta_train_local"), "--num_processes=8", "--chips_per_host=4", "--num_slices=2",
        "--", *reference_args, "exact_gradient_sums=true"
    ], capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stdout + local.stderr
    reference = dict(_lines(os.path.join(data, "unresized.jsonl")))
    metrics = os.path.join(data, "elastic.jsonl")
    env = dict({k: v for k, v in os.environ.items() if not k.startswith("MANTA_")}, MANTA_ADDRESS=free.address,
               PYTHONPATH=PACKAGE_DIR, HOME=str(tmp_path), MANTA_TOKEN=_token(free))
    driver = subprocess.Popen(
        [sys.executable,
         os.path.join(REPO_DIR, "examples", "python", "maxtext_elastic_trainer.py"), *args], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=env)
    try:
        wait_for(lambda: len(_lines(metrics)) >= 12 or driver.poll() is not None, 120, "12 steps on 8 workers")
        assert driver.poll() is None, driver.stdout.read()
        pid, host_env = local_cluster.raylet_of(free.temp_dir, "tpu-group-1", 2)
        for p in [pid] + _children(pid):
            os.kill(p, signal.SIGKILL)
        wait_for(lambda: _group_size(free) == 4, 60, "the group to shrink to 4", interval_s=0.2)
        at_four = len(_lines(metrics))
        wait_for(lambda: len(_lines(metrics)) >= at_four + 3, 60, "three steps on 4 workers")
        host_env = {k: v for k, v in host_env.items() if k.startswith(("TPU_", "PATH", "HOME"))}
        subprocess.run([
            os.path.join(free.bin_dir, "manta"), "start", f"--address={free.address}", f"--temp-dir={free.temp_dir}",
            "--num-cpus=1"
        ], env=host_env, cwd=free.temp_dir, check=True, capture_output=True, timeout=60)
        out, _ = driver.communicate(timeout=300)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, out
    assert "Deciding to resize the worker group from 8 -> 4 workers." in out, out
    assert "Deciding to resize the worker group from 4 -> 8 workers." in out, out
    assert "new workers taking the state from peers" in out, out
    trained = dict(_lines(metrics))
    assert sorted(trained) == sorted(reference)
    for step, loss in reference.items():
        assert abs(trained[step] - loss) <= 1e-4 * abs(loss), (step, trained[step], loss)


# ---- preemption notices (last: it replaces a host) --------------------------------


def preemption_loop(config):
    ctx = train.get_context()
    rank = ctx.get_world_rank()
    out = config["out"]
    if rank == 1:
        with open(os.path.join(out, "rank1.tmp"), "w") as f:
            json.dump(
                {
                    "node": manta.get_runtime_context().get_node_id(), "slice": os.environ["TPU_NAME"],
                    "worker": os.environ["TPU_WORKER_ID"]
                }, f)
        os.replace(os.path.join(out, "rank1.tmp"), os.path.join(out, "rank1"))
    info = None
    for i in range(1200):
        train.report({"i": i})
        info = train.get_preemption_info()
        if info is not None:
            break
        time.sleep(0.05)
    with open(os.path.join(out, "rank%d.seen" % rank), "w") as f:
        json.dump(
            None if info is None else
            {"deadline": info.deadline, "ranks": info.preempted_ranks, "reason": info.reason, "at": i}, f)


def test_every_rank_sees_the_preemption_notice_of_a_draining_host(free, tmp_path):
    out = str(tmp_path)
    trainer = JaxTrainer(preemption_loop, train_loop_config={"out": out}, scaling_config=_scaling(4),
                         run_config=RunConfig(name="preempted", storage_path=out))
    box = {}
    fit = threading.Thread(target=lambda: box.update(result=_try(trainer.fit)))
    fit.start()
    try:
        wait_for(lambda: os.path.exists(os.path.join(out, "rank1")), 60, "the loop to start")
        with open(os.path.join(out, "rank1")) as f:
            host = json.load(f)
        _, env = local_cluster.raylet_of(free.temp_dir, host["slice"], host["worker"])
        before = time.time()
        r = subprocess.run([
            os.path.join(free.bin_dir, "manta"), "drain-node", host["node"], "--reason=preemption", "--deadline=60s",
            f"--temp-dir={free.temp_dir}"
        ], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        fit.join(120)
    result = box["result"]
    assert not isinstance(result, BaseException), result
    seen = []
    for rank in range(4):
        with open(os.path.join(out, "rank%d.seen" % rank)) as f:
            seen.append(json.load(f))
    assert all(s is not None for s in seen), seen
    assert {s["at"] for s in seen} == {seen[0]["at"]}  # after the same report
    for s in seen:
        assert s["ranks"] == [1] and s["reason"] == "preemption"
        assert before + 50 <= s["deadline"] <= time.time() + 61
    # The drained host leaves once idle; a replacement takes its place.
    wait_for(lambda: not any(n["NodeID"] == host["node"] and n["Alive"] for n in manta.nodes()), 120,
             "the drained host to leave", interval_s=0.2)
    host_env = {k: v for k, v in env.items() if k.startswith(("TPU_", "PATH", "HOME"))}
    subprocess.run([
        os.path.join(free.bin_dir, "manta"), "start", f"--address={free.address}", f"--temp-dir={free.temp_dir}",
        "--num-cpus=1"
    ], env=host_env, cwd=free.temp_dir, check=True, capture_output=True, timeout=60)
    wait_for(_all_free, 60, "the replacement host to make its slice whole")
