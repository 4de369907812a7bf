"""Ray's ray_perf metrics from Python, each beside the same metric of the C++
API (bench_microbenchmark) measured in the same run on the same cluster, and
Ray's published Python figures.

    PYTHONPATH=build/python /usr/bin/python3 bench/python/microbenchmark.py [--seconds 2] [--repeat 3] [--json FILE]

It starts a one-node cluster (2 CPUs) in a temporary directory, runs the C++
benchmark against it, then the Python one, --repeat times, and stops the
cluster; each side's figure is the median of its rounds, and the ratio the
median of the rounds' ratios. It also
measures manta.init() with no cluster to the first task's result, and an
idle Python worker's private memory (USS).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import manta
from manta._private.local_cluster import LocalCluster, find_binary

# Ray's published figures (ray_perf, 64 vCPUs), as its release tests report.
RAY = {
    "single_client_tasks_sync": 981,
    "single_client_tasks_async": 8041,
    "1_1_actor_calls_sync": 2012,
    "1_1_actor_calls_async": 8664,
    "single_client_put_calls": 5173,
    "single_client_get_calls": 10620,
}
BATCH = 1000


@manta.remote
def noop():
    return 0


@manta.remote
class Target:

    def call(self):
        return 0


@manta.remote
class Caller:

    def __init__(self, target):
        self.target = target

    def run(self, n, batch):
        for _ in range(0, n, batch):
            manta.get([self.target.call.remote() for _ in range(batch)])
        return n


def rate(seconds, per_round, round_fn):
    """Rounds per second, times per_round. As Ray's timeit, the clock is read
    once per batch of rounds (the batch doubling while it takes under a
    millisecond), as bench/common/cluster.cc's PairedRate does for the C++
    side."""
    round_fn()  # warm
    n, step = 0, 1
    start = last = time.perf_counter()
    while last - start < seconds:
        for _ in range(step):
            round_fn()
        n += step
        now = time.perf_counter()
        if now - last < 1e-3:
            step *= 2
        last = now
    return n * per_round / (last - start)


def measure(seconds):
    out = {}
    out["single_client_tasks_sync"] = rate(seconds, 1, lambda: manta.get(noop.remote()))
    out["single_client_tasks_async"] = rate(seconds, BATCH, lambda: manta.get([noop.remote() for _ in range(BATCH)]))
    target = Target.remote()
    out["1_1_actor_calls_sync"] = rate(seconds, 1, lambda: manta.get(target.call.remote()))
    out["1_1_actor_calls_async"] = rate(seconds, BATCH, lambda: manta.get([target.call.remote() for _ in range(BATCH)]))
    n = 2
    targets = [Target.remote() for _ in range(n)]
    callers = [Caller.remote(t) for t in targets]
    out["n_n_actor_calls_async"] = rate(seconds, n * BATCH,
                                        lambda: manta.get([c.run.remote(BATCH, 100) for c in callers]))
    out["single_client_put_calls"] = rate(seconds, 1, lambda: manta.put(42))
    small = manta.put(42)
    out["single_client_get_calls"] = rate(seconds, 1, lambda: manta.get(small))
    big = np.full(100 << 20, 7, dtype=np.uint8)
    out["single_client_put_gigabytes"] = rate(seconds, big.nbytes / 1e9, lambda: manta.put(big))

    def wait_1k():
        not_ready = [noop.remote() for _ in range(BATCH)]
        while not_ready:
            _, not_ready = manta.wait(not_ready)

    out["single_client_wait_1k_refs"] = rate(seconds, 1, wait_1k)
    return out


def cpp_rates(address, temp_dir, seconds):
    exe = find_binary("bench_microbenchmark")
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        with open(os.path.join(temp_dir, "session_latest", "token")) as t:
            env = dict(os.environ, MANTA_ADDRESS=address, MANTA_TOKEN=t.read().strip())
        subprocess.run([exe, "--address", address, "--seconds",
                        str(seconds), "--json", f.name], check=True, stdout=subprocess.DEVNULL, env=env, cwd=temp_dir)
        with open(f.name) as j:
            report = json.load(j)
    return {name: m["value"] for name, m in report.items()}


def first_result_seconds():
    code = ("import time;t=time.perf_counter();import manta;manta.init(num_cpus=1)\n"
            "@manta.remote\ndef f(): return 1\n"
            "manta.get(f.remote());print(time.perf_counter()-t)")
    env = {k: v for k, v in os.environ.items() if k not in ("MANTA_ADDRESS", "RAY_ADDRESS")}
    # The child runs elsewhere: give it this process's manta by absolute path.
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(manta.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root] + [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=tempfile.gettempdir())
    if out.returncode != 0:
        raise SystemExit("init_to_first_result failed:\n" + out.stderr)
    return float(out.stdout.strip().splitlines()[-1])


def idle_worker_uss_mb():

    @manta.remote
    def pid():
        return os.getpid()

    worker = manta.get(pid.remote())
    time.sleep(0.5)  # let the task's garbage go
    total = 0
    with open("/proc/%d/smaps_rollup" % worker) as f:
        for line in f:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1])
    return total / 1024.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds of both sides, one after the other; each figure is the median of its rounds")
    parser.add_argument("--json")
    args = parser.parse_args()
    cluster = LocalCluster(num_cpus=2)
    cpps, pys = [], []
    try:
        manta.init(address=cluster.address, _temp_dir=cluster.temp_dir)
        for _ in range(max(1, args.repeat)):  # the machine's noise hits both sides alike
            cpps.append(cpp_rates(cluster.address, cluster.temp_dir, args.seconds))
            pys.append(measure(args.seconds))
        uss = idle_worker_uss_mb()
        manta.shutdown()
    finally:
        cluster.stop()
    startup = first_result_seconds()
    rows = []
    print("%-30s %14s %14s %7s %10s" % ("metric", "python", "c++", "py/c++", "vs Ray"))
    for name in pys[0]:
        value = statistics.median(p[name] for p in pys)
        base = statistics.median(c[name] for c in cpps) if all(c.get(name) for c in cpps) else None
        # The median of each round's ratio: a round's two sides ran minutes apart at most.
        ratio = statistics.median(p[name] / c[name] for p, c in zip(pys, cpps)) if base else float("nan")
        ray = RAY.get(name)
        print("%-30s %14.1f %14s %7.2f %10s" % (name, value, "%.1f" % base if base else "-", ratio, "%.1fx" %
                                                (value / ray) if ray else "-"))
        rows.append({"metric": name, "value": value, "cpp": base, "ratio": ratio, "ray": ray})
    print("%-30s %14.2f s (goal <= 1.5 s)" % ("init_to_first_result", startup))
    print("%-30s %14.1f MB (goal <= 30 MB)" % ("idle_worker_uss", uss))
    rows.append({"metric": "init_to_first_result_s", "value": startup})
    rows.append({"metric": "idle_worker_uss_mb", "value": uss})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"metrics": rows}, f, indent=2)


if __name__ == "__main__":
    main()
