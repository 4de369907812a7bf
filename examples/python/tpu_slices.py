"""Reserve whole TPU slices and run one task per host on them, with Ray's
ray.util.tpu API (manta.util.tpu).

Start a simulated TPU cluster on this machine (a head and two v4-16 slices of
two hosts each; every host is a raylet with the environment GKE gives a TPU
pod), run the example against it, then stop it:

    build/bin/manta up --tpu v4-16 --slices 2 --temp-dir /tmp/manta-tpu
    PYTHONPATH=build/python /usr/bin/python3 examples/python/tpu_slices.py --temp-dir /tmp/manta-tpu
    build/bin/manta down --temp-dir /tmp/manta-tpu

Any pod type works (`--tpu v6e-16` starts slices of four hosts); the example
uses the first pod type the cluster has. It exits with status 1 when the
cluster has no TPU slice.
"""

import argparse
import os
import sys
import time

import manta
from manta.util import tpu

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--temp-dir", default="/tmp/manta", help="the cluster's --temp-dir (default: /tmp/manta)")
args = parser.parse_args()

manta.init(address="auto", _temp_dir=args.temp_dir)

slices = tpu.list_slices()
if not slices:
    sys.exit("no TPU slices in this cluster: start one with "
             f"`manta up --tpu v4-16 --slices 2 --temp-dir {args.temp_dir}`")
pod_type, found = next(iter(slices.items()))
topology, version = found[0].topology, pod_type.rsplit("-", 1)[0]
shape = tpu.get_slice_shape(topology, version)
print(f"{len(found)} slice(s) of {pod_type} (topology {topology}: {shape.hosts_per_slice} hosts of "
      f"{shape.chips_per_host} chips): {', '.join(s.name for s in found)}")


@manta.remote
def host_report(step):
    """What each host's process sees: the variables JAX and libtpu read."""
    env = os.environ
    slice_id = env.get("MEGASCALE_SLICE_ID", "-")
    return (f"step {step}: slice {env['TPU_NAME']} (MEGASCALE_SLICE_ID {slice_id}) "
            f"worker {env['TPU_WORKER_ID']} of {env['TPU_WORKER_HOSTNAMES'].count(',') + 1}, "
            f"{tpu.get_num_tpu_chips_on_node()} chips")


def wait_until_free(n, timeout_s=30):
    """Waits until n slices are free (a release reaches the cluster's resource view shortly after)."""
    deadline = time.monotonic() + timeout_s
    while tpu.get_num_ready_tpu_slices(topology, version) < n and time.monotonic() < deadline:
        time.sleep(0.1)
    return tpu.get_num_ready_tpu_slices(topology, version)


# 1. Reserve every free slice of that shape as one multi-slice group and run on each host.
num_slices = max(1, tpu.get_num_ready_tpu_slices(topology, version))
with tpu.slice_placement_group(topology, version, num_slices=num_slices) as spg:
    manta.get(spg.ready(), timeout=30)
    print(f"reserved {spg.num_slices} slice(s), {spg.num_hosts} hosts; coordinator "
          f"{spg.process_env(0, 0).get('MEGASCALE_COORDINATOR_ADDRESS') or '(single slice: none)'}")
    for line in manta.get(tpu.dispatch(host_report, 1, tpu_slice=spg), timeout=60):
        print(" ", line)
# Leaving the block released the slices.
print("free slices after release:", wait_until_free(num_slices))

# 2. One-shot: reserve one slice, run on its hosts; it is released after the tasks.
for line in manta.get(tpu.dispatch(host_report, 2, topology=topology, accelerator_version=version), timeout=60):
    print(" ", line)

# 3. ray-tpu's manager: the free slices by pod type, then a multi-slice run on them.
wait_until_free(num_slices)
tpus = tpu.TpuManager.get_available_resources()[pod_type]
refs = tpu.TpuManager.remote(tpus, host_report, True, {"XLA_FLAGS": "--xla_dump_to=/tmp/dump"}, 3)
for line in manta.get(list(refs), timeout=60):
    print(" ", line)
refs.release()

manta.shutdown()
