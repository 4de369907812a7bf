"""The package as a user installs it: into a fresh venv with no build tree
on its path, beside Debian's python3-grpcio in one process."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import PYTHON_DIR, REPO_DIR

BUILD_DIR = os.environ.get("MANTA_BUILD_DIR") or os.path.join(REPO_DIR, "build")


def _run(python, code, cwd, env=None):
    return subprocess.run([python, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=cwd, timeout=120,
                          env=env)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    root = tmp_path_factory.mktemp("install")
    source = root / "python"
    shutil.copytree(PYTHON_DIR, source, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__",
                                                                      "src"))
    shutil.copy(os.path.join(REPO_DIR, "CMakeLists.txt"), root / "CMakeLists.txt")
    venv_dir = root / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv_dir)], check=True)
    python = str(venv_dir / "bin" / "python")
    env = dict(os.environ, MANTA_BUILD_DIR=BUILD_DIR, PIP_NO_INDEX="1")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                           str(source)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return python, str(root)


def _clean_env():
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "MANTA_ADDRESS", "RAY_ADDRESS", "MANTA_BIN_DIR", "MANTA_TOKEN")
    }
    return env


def test_installed_package_runs_a_program_with_no_build_tree(venv):
    python, cwd = venv
    proc = _run(
        python, """
        import manta
        assert "site-packages" in manta.__file__, manta.__file__
        @manta.remote
        def double(x):
            return 2 * x
        print(sum(manta.get([double.remote(i) for i in range(10)])))
    """, cwd, env=_clean_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "90"


def test_grpc_and_manta_share_a_process(venv):
    pytest.importorskip("grpc")
    python, cwd = venv
    proc = _run(
        python, """
        from concurrent import futures
        import grpc
        import manta

        handler = grpc.method_handlers_generic_handler("echo.Echo", {
            "Say": grpc.unary_unary_rpc_method_handler(lambda req, ctx: b"echo:" + req)})
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        channel = grpc.insecure_channel("127.0.0.1:%d" % port)
        say = channel.unary_unary("/echo.Echo/Say")

        @manta.remote
        def upper(s):
            return s.upper()

        print(say(b"before", timeout=10).decode())
        print(manta.get(upper.remote("manta")))
        print(say(manta.get(upper.remote("after")).encode(), timeout=10).decode())
        server.stop(None)
    """, cwd, env=_clean_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["echo:before", "MANTA", "echo:AFTER"]
