"""The Python examples run as a user runs them, each with the cluster it
starts itself (manta.init() with none running), and print what they say."""

import os
import subprocess
import sys

from conftest import PACKAGE_DIR, REPO_DIR

EXAMPLES = os.path.join(REPO_DIR, "examples", "python")


def run_example(name, *args, env=None):
    base = {k: v for k, v in os.environ.items() if k not in ("MANTA_ADDRESS", "RAY_ADDRESS", "MANTA_TOKEN")}
    base["PYTHONPATH"] = PACKAGE_DIR
    base.update(env or {})
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args], capture_output=True, text=True,
                          timeout=120, env=base, cwd=EXAMPLES)


def test_tasks_and_actors_example():
    proc = run_example("tasks_and_actors.py")
    assert proc.returncode == 0, proc.stderr
    assert "sum of squares: 328350" in proc.stdout and "counter: 15" in proc.stdout
    assert "waited: 49" in proc.stdout


def test_placement_group_example():
    proc = run_example("placement_group.py")
    assert proc.returncode == 0, proc.stderr
    assert "placement group ready: 2 bundles" in proc.stdout
    assert "bundle 0 ran in worker pid" in proc.stdout and "bundle 1 ran in worker pid" in proc.stdout
