"""Installs the manta package with the compiled module and the programs a
local cluster runs (manta, gcs_server, raylet, dashboard, job_runner), from
a build tree (default ../build; MANTA_BUILD_DIR names another):

    cmake -S . -B build -G Ninja && ninja -C build manta_python demo
    python3 -m pip install --no-build-isolation ./python

No network is used: nothing is compiled or downloaded here.
"""

import glob
import os
import shutil

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(os.environ.get("MANTA_BUILD_DIR", os.path.join(HERE, "..", "build")))
PROGRAMS = ("manta", "gcs_server", "raylet", "dashboard", "job_runner")


def _built_module():
    found = glob.glob(os.path.join(BUILD, "python", "manta", "_core.*.so"))
    if not found:
        raise SystemExit("no compiled manta._core under %s/python/manta: build it first "
                         "(ninja -C build manta_python), or set MANTA_BUILD_DIR" % BUILD)
    return found[0]


class BuildWithBinaries(build_py):
    """Copies the compiled module and the programs into the package."""

    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "manta")
        shutil.copy2(_built_module(), target)
        bin_dir = os.path.join(target, "_bin")
        os.makedirs(bin_dir, exist_ok=True)
        for name in PROGRAMS:
            src = os.path.join(BUILD, "bin", name)
            if not os.access(src, os.X_OK):
                raise SystemExit("missing %s: build the demo target (ninja -C build demo)" % src)
            shutil.copy2(src, os.path.join(bin_dir, name))


def _version():
    with open(os.path.join(HERE, "..", "CMakeLists.txt")) as f:
        for line in f:
            if line.startswith("project(manta VERSION"):
                return line.split()[2]
    return "0.0.0"


setup(
    name="manta",
    version=_version(),
    description="A distributed actor runtime for multi-host TPU training, with Ray's Python API",
    packages=find_packages(include=["manta", "manta.*"]),
    python_requires=">=3.9",
    install_requires=[],  # cloudpickle, numpy, msgpack: Debian's python3-* packages
    cmdclass={"build_py": BuildWithBinaries},
    zip_safe=False,
)
