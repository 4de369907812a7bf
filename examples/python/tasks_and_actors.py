"""Tasks, actors and objects from Python, with Ray's API.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/tasks_and_actors.py

With no cluster running, manta.init() starts one on this machine and stops it
when the program exits; with MANTA_ADDRESS set (or address="auto" and a
cluster from `manta start --head`) it joins that one.
"""

import manta

manta.init()


@manta.remote(num_cpus=1)
def square(x):
    return x * x


@manta.remote(max_restarts=2)
class Counter:

    def __init__(self, start):
        self.n = start

    def incr(self, by=1):
        self.n += by
        return self.n


print("sum of squares:", sum(manta.get([square.remote(i) for i in range(100)])))
c = Counter.options(name="c").remote(10)
print("counter:", manta.get(c.incr.remote(5)))
ref = manta.put(list(range(10)))
print("put/get:", manta.get(ref)[-1])
ready, _ = manta.wait([square.remote(7)], timeout=10)
print("waited:", manta.get(ready[0]))
manta.shutdown()
