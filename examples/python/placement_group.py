"""Reserve two bundles on the cluster and run a task in each, as Ray's
placement groups do.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/placement_group.py
"""

import os

import manta
from manta.util.placement_group import placement_group, remove_placement_group
from manta.util.scheduling_strategies import PlacementGroupSchedulingStrategy

manta.init(num_cpus=4)

pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="PACK")
manta.get(pg.ready(), timeout=30)
print("placement group ready:", pg.bundle_count, "bundles")


@manta.remote(num_cpus=1)
def where(i):
    return i, os.getpid()


refs = [
    where.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        placement_group=pg, placement_group_bundle_index=i)).remote(i) for i in range(2)
]
for i, pid in manta.get(refs):
    print("bundle", i, "ran in worker pid", pid)
remove_placement_group(pg)
manta.shutdown()
