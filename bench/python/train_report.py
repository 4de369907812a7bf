"""What training from Python costs beside training from C++, measured in one
run on one simulated cluster of two v6e-16 slices (8 TPU hosts):

    PYTHONPATH=build/python /usr/bin/python3 bench/python/train_report.py [--reports 200] [--steps 10]
        [--model manta-35m] [--seq 64] [--rounds 2] [--json FILE]

1. report(): the seconds per call of a pure-Python loop's report() against
   a C++ loop's Report, 8 workers, `reports` calls each, taking turns
   `rounds` times (median). Goal: python / c++ <= 2.
2. The same MaxText config (one slice: fsdp 4 x tensor 4) trained by the
   C++ maxtext_trainer and by examples/python/maxtext_ray_trainer.py as
   drivers: the median step time of steps 2 and later. Goal: c++ / python
   >= 0.97 (the Python loop runs the same kernels).
3. Driver start to the first completed step, both ways (from the same
   runs).
4. A host killed (its raylet and workers, SIGKILL) to the next completed
   step: for a pure-Python loop of fixed size (8 workers, a checkpoint
   every step), which restarts from its checkpoint once a replacement host
   (started at once) makes the slice whole; goal <= 3 s + one step. And
   for the kernels' loop from Python, elastic (4, 8): the survivors go on
   at 4 workers; goal <= 1 s + one step.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import manta
from manta import _core
from manta._private import local_cluster
from manta import train
from manta.train import JaxTrainer, RunConfig, ScalingConfig

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("MANTA_BIN_DIR") or os.path.join(REPO, "build", "bin")
BUILD_PYTHON = os.environ.get("MANTA_PYTHON_DIR") or os.path.join(REPO, "build", "python")
SCALING = dict(use_tpu=True, topology="4x4", accelerator_type="TPU-V6E", resources_per_worker={"TPU": 4},
               placement_strategy="SPREAD")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def manta_up(temp_dir):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MANTA_")}
    subprocess.run([
        os.path.join(BIN, "manta"), "up", "--tpu", "v6e-16", "--slices", "2", "--host-cpus", "1", f"--port={port}",
        f"--dashboard-port={free_port()}", f"--metrics-export-port={free_port()}", f"--temp-dir={temp_dir}"
    ], check=True, capture_output=True, env=env, cwd=temp_dir, timeout=180)
    return f"127.0.0.1:{port}"


def manta_down(temp_dir):
    subprocess.run([os.path.join(BIN, "manta"), "down", f"--temp-dir={temp_dir}"], capture_output=True, timeout=120)


def python_report_loop(config):
    train.report({"step": -1})  # every rank is up
    start = time.perf_counter()
    for i in range(config["reports"]):
        train.report({"step": i})
    per_call = (time.perf_counter() - start) / max(config["reports"], 1)
    if train.get_context().get_world_rank() == 0:
        with open(config["out"], "w") as f:
            f.write("%.9f\n" % per_call)


def report_costs(reports, rounds, storage):
    py, cpp = [], []
    os.makedirs(storage, exist_ok=True)
    scaling = {
        "use_tpu": True, "min_workers": 8, "max_workers": 8, "topology": "4x4", "accelerator_type": "TPU-V6E",
        "resources_per_worker": {"TPU": 4.0}, "placement_strategy": "SPREAD"
    }
    for r in range(rounds):
        out = os.path.join(storage, "py%d" % r)
        JaxTrainer(python_report_loop, train_loop_config={"reports": reports, "out": out},
                   scaling_config=ScalingConfig(num_workers=8, **SCALING),
                   run_config=RunConfig(name="report_py%d" % r, storage_path=storage)).fit()
        with open(out) as f:
            py.append(float(f.read()))
        out = os.path.join(storage, "cpp%d" % r)
        res = _core._train_fit_report_bench(reports, out, scaling,
                                            {"name": "report_cpp%d" % r, "storage_path": storage})
        if res["code"] != 0:
            raise RuntimeError(res["message"])
        with open(out) as f:
            cpp.append(float(f.read()))
    return statistics.median(py), statistics.median(cpp)


def kill_host(temp_dir, slice_name, worker_id):
    """SIGKILLs a host's raylet and its workers; the time and its environment."""
    pid, env = local_cluster.raylet_of(temp_dir, slice_name, worker_id)
    victims = [pid]
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    victims.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    at = time.time()
    for p in victims:
        os.kill(p, 9)
    return at, env


def start_host(address, temp_dir, env):
    env = {k: v for k, v in env.items() if k.startswith(("TPU_", "PATH", "HOME"))}
    subprocess.run(
        [os.path.join(BIN, "manta"), "start", f"--address={address}", f"--temp-dir={temp_dir}", "--num-cpus=1"],
        env=env, cwd=temp_dir, check=True, capture_output=True, timeout=60)


def wait_until(condition, timeout_s):
    deadline = time.time() + timeout_s
    while not condition():
        if time.time() > deadline:
            raise TimeoutError("timed out")
        time.sleep(0.02)


STEP_S = 0.2


def checkpointing_loop(config):
    ctx = train.get_context()
    step = 0
    if train.get_checkpoint() is not None:
        with open(os.path.join(train.get_checkpoint().path, "rank_0")) as f:
            step = int(f.read()) + 1
    while not os.path.exists(config["stop"]):
        # Beside the stop file: a worker killed mid-step leaves it there.
        scratch = os.path.dirname(config["stop"])
        with tempfile.TemporaryDirectory(prefix="ckpt_", dir=scratch) as local:  # report() keeps a copy
            with open(os.path.join(local, "rank_%d" % ctx.get_world_rank()), "w") as f:
                f.write(str(step))
            time.sleep(STEP_S)
            train.report({"step": step}, checkpoint=train.Checkpoint.from_directory(local))
        if ctx.get_world_rank() == 0:
            with open(config["progress"], "a") as f:
                f.write("%f %d %d\n" % (time.time(), ctx.get_attempt_number(), step))
        step += 1


def progress(path):
    try:
        with open(path) as f:
            return [(float(t), int(a), int(s)) for t, a, s in (line.split() for line in f if line.strip())]
    except (OSError, ValueError):
        return []


def python_loop_recovery(address, temp_dir, storage):
    """Kill -> the restarted attempt's first completed step (seconds)."""
    import threading
    config = {"stop": os.path.join(storage, "stop"), "progress": os.path.join(storage, "progress")}
    trainer = JaxTrainer(
        checkpointing_loop, train_loop_config=config, scaling_config=ScalingConfig(num_workers=8, **SCALING),
        run_config=RunConfig(name="recovery_py", storage_path=storage,
                             failure_config=train.FailureConfig(max_failures=1)))
    fit = threading.Thread(target=trainer.fit)
    fit.start()
    try:
        wait_until(lambda: len(progress(config["progress"])) >= 5, 120)
        killed, env = kill_host(temp_dir, "tpu-group-1", 2)
        start_host(address, temp_dir, env)
        wait_until(lambda: any(a == 2 for _, a, _ in progress(config["progress"])), 120)
    finally:
        open(config["stop"], "w").close()
        fit.join(120)
    return min(t for t, a, _ in progress(config["progress"]) if a == 2) - killed


def kernels_recovery(address, temp_dir, data):
    """Kill -> the next completed step of the kernels' loop from Python,
    elastic (4, 8), tiny model (seconds; and the median step)."""
    metrics = os.path.join(data, "kill.jsonl")
    args = [
        os.path.join(REPO, "train", "kernels", "configs",
                     "base.yml"), "model_name=tiny", "steps=60", "per_device_batch_size=1", "ici_fsdp_parallelism=4",
        "ici_tensor_parallelism=4", "base_output_directory=" + data, "run_name=kill", "metrics_file=" + metrics
    ]
    with open(os.path.join(temp_dir, "session_latest", "token")) as f:
        token = f.read().strip()
    env = dict(os.environ, MANTA_ADDRESS=address, MANTA_TOKEN=token, PYTHONPATH=BUILD_PYTHON, HOME=temp_dir)
    driver = subprocess.Popen(
        [sys.executable, os.path.join(REPO, "examples", "python", "maxtext_elastic_trainer.py"), *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)

    def lines():
        try:
            with open(metrics) as f:
                return [json.loads(line) for line in f if line.strip()]
        except (OSError, ValueError):
            return []

    try:
        wait_until(lambda: len(lines()) >= 10, 180)
        before = len(lines())
        killed, host_env = kill_host(temp_dir, "tpu-group-1", 2)
        wait_until(lambda: len(lines()) > before, 120)
        recovered = time.time() - killed
        start_host(address, temp_dir, host_env)
        driver.wait(600)
    finally:
        if driver.poll() is None:
            driver.kill()
    return recovered, statistics.median(r["seconds"] for r in lines() if r["step"] >= 2)


def maxtext_args(data, run, model, seq, steps):
    return [
        os.path.join(REPO, "train", "kernels", "configs", "base.yml"), "model_name=" + model,
        "max_target_length=%d" % seq, "per_device_batch_size=1",
        "steps=%d" % steps, "ici_fsdp_parallelism=4", "ici_tensor_parallelism=4", "base_output_directory=" + data,
        "run_name=" + run,
        "metrics_file=%s/%s.jsonl" % (data, run)
    ]


def run_driver(cmd, address, temp_dir):
    """Runs a driver; (seconds from its start to its first completed step
    line, its output)."""
    with open(os.path.join(temp_dir, "session_latest", "token")) as f:
        token = f.read().strip()
    env = dict(os.environ, MANTA_ADDRESS=address, MANTA_TOKEN=token, PYTHONPATH=BUILD_PYTHON, HOME=temp_dir)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    first = None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if first is None and "completed step:" in line:
            first = time.perf_counter() - start
    proc.wait(600)
    if proc.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (cmd[0], "".join(lines[-40:])))
    return first, "".join(lines)


def step_seconds(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r["seconds"] for r in rows if r["step"] >= 2]


def maxtext_both_ways(address, temp_dir, data, args):
    cpp_steps, py_steps, cpp_first, py_first = [], [], [], []
    for r in range(args.rounds):
        run = "cpp%d" % r
        first, _ = run_driver([os.path.join(BIN, "maxtext_trainer"), "--num_workers=4"]
                              + maxtext_args(data, run, args.model, args.seq, args.steps), address, temp_dir)
        cpp_first.append(first)
        cpp_steps += step_seconds(os.path.join(data, run + ".jsonl"))
        run = "py%d" % r
        argv = maxtext_args(data, run, args.model, args.seq, args.steps)
        first, _ = run_driver(
            [sys.executable, os.path.join(REPO, "examples", "python", "maxtext_ray_trainer.py")] + argv, address,
            temp_dir)
        py_first.append(first)
        py_steps += step_seconds(os.path.join(data, run + ".jsonl"))
    return (statistics.median(cpp_steps), statistics.median(py_steps), statistics.median(cpp_first),
            statistics.median(py_first))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--model", default="manta-35m")
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--json")
    args = parser.parse_args()
    temp_dir = tempfile.mkdtemp(prefix="manta-bench-train-")
    rows = []
    try:
        address = manta_up(temp_dir)
        manta.init(address=address, _temp_dir=temp_dir)
        py, cpp = report_costs(args.reports, args.rounds, os.path.join(temp_dir, "results"))
        manta.shutdown()
        rows += [("report_seconds_python", py, "s", None), ("report_seconds_cpp", cpp, "s", None),
                 ("report_python_vs_cpp", py / cpp, "ratio", "<= 2")]
        data = os.path.join(temp_dir, "data")
        cpp_step, py_step, cpp_first, py_first = maxtext_both_ways(address, temp_dir, data, args)
        rows += [("step_seconds_cpp", cpp_step, "s", None), ("step_seconds_python", py_step, "s", None),
                 ("step_throughput_python_vs_cpp", cpp_step / py_step, "ratio", ">= 0.97"),
                 ("start_to_first_step_cpp", cpp_first, "s", None), ("start_to_first_step_python", py_first, "s", None)]
        manta.init(address=address, _temp_dir=temp_dir)
        rows.append(("recover_kill_to_step_python_loop",
                     python_loop_recovery(address, temp_dir, os.path.join(temp_dir,
                                                                          "results")), "s", "<= 3 s + %.1f s" % STEP_S))
        manta.shutdown()
        recovered, step = kernels_recovery(address, temp_dir, os.path.join(temp_dir, "kill"))
        rows += [("recover_kill_to_step_kernels_python", recovered, "s", "<= 1 s + %.3f s" % step)]
    finally:
        manta_down(temp_dir)
    for name, value, unit, goal in rows:
        print("%-32s %12.6f %-5s %s" % (name, value, unit, "(goal %s)" % goal if goal else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({name: {"value": value, "unit": unit, "goal": goal} for name, value, unit, goal in rows}, f,
                      indent=2)


if __name__ == "__main__":
    main()
