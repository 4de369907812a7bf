// Two-process gloo measurements over loopback TCP: the ring-chunked
// allreduce the kernels use, gloo's newer allreduce(AllreduceOptions) API,
// the ring allgather, and the one-to-all broadcast a returning slice's state
// transfer builds afresh for each tensor.
#pragma once

#include <map>
#include <string>

namespace manta::train::bench {

// Runs as one of the two processes (`rank` 0 hosts the rendezvous on
// `port`) and, on rank 0, prints one JSON object of GiB/s per test.
int RunGlooChild(int rank, int port);

// Starts two copies of `self` as gloo children and returns rank 0's
// figures, keyed by test name (GiB/s of payload per process).
std::map<std::string, double> MeasureGloo(const std::string& self);

}  // namespace manta::train::bench
