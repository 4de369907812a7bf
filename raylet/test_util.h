// Helpers the raylet rooms' unit tests share.
#pragma once

#include <map>
#include <string>

#include "common/resources.h"
#include "proto/node_manager.pb.h"

namespace manta::raylet::testing {

// A resource set the test knows to be valid.
inline ResourceSet Set(const std::map<std::string, double>& m) { return *ResourceSet::FromMap(m); }

// A lease request's reply, once its callback ran.
struct LeaseCall {
  rpc::RequestWorkerLeaseReply reply;
  bool done = false;
};

}  // namespace manta::raylet::testing
