// BundleManager: the raylet's half of placement groups. Handles the GCS's
// two-phase reservation calls (PrepareBundles, CommitBundles, CancelBundles,
// ReleaseUnusedBundles) on top of LocalResourceManager, and stops the leases
// that run in bundles it returns (through LeaseManager).
//
// Owns nothing but its options: bundles live in LocalResourceManager, leases
// in LeaseManager. Every call is idempotent: a retried prepare never reserves
// twice, a retried commit or cancel changes nothing. Leases in returned
// bundles are ended before the bundles' resources go back. Handlers leave the
// reply's `resources` to the caller (the raylet fills in its NodeResources
// after the call). Thread: the raylet's loop thread; no locks. Compiles
// without gRPC.
//
//   BundleManager bundles({node_id, labels}, &local, &leases);
//   bundles.HandlePrepareBundles(request, &reply, done);
#pragma once

#include <map>
#include <string>

#include "common/id.h"
#include "common/rpc/done.h"
#include "common/thread_checker.h"
#include "proto/node_manager.pb.h"
#include "raylet/lease_manager.h"
#include "raylet/local_resource_manager.h"

namespace manta::raylet {

struct BundleManagerOptions {
  NodeId node_id;
  std::map<std::string, std::string> labels;  // this node's
};

class BundleManager {
 public:
  BundleManager(BundleManagerOptions options, LocalResourceManager* local, LeaseManager* leases);

  // Reserves the bundles (all of one group) not yet held here, all or none.
  // OK with success = false (and a message) when they do not all fit now, a
  // bundle's label selector does not match this node, or the node drains
  // (LeaseManager::draining()); nothing new is then held. Errors: InvalidArgument for a malformed request (no bundles,
  // several groups, a malformed group id, a negative or repeated index, an
  // empty or malformed resource map, a fractional TPU on a TPU host, a held
  // bundle sent with other resources, a malformed label selector);
  // FailedPrecondition for a bundle addressed to another node_id.
  void HandlePrepareBundles(const rpc::PrepareBundlesRequest& request, rpc::PrepareBundlesReply* reply, rpc::Done done);
  // Makes prepared bundles usable by the group (empty indices: every bundle
  // of the group held here). NotFound, with nothing committed, when one is
  // not held here; InvalidArgument for a malformed group id or a negative
  // index.
  void HandleCommitBundles(const rpc::CommitBundlesRequest& request, rpc::CommitBundlesReply* reply, rpc::Done done);
  // Ends the leases in the bundles (empty indices: every bundle of the group
  // held here), then returns them. Unknown bundles are ignored.
  // InvalidArgument for a malformed group id or a negative index.
  void HandleCancelBundles(const rpc::CancelBundlesRequest& request, rpc::CancelBundlesReply* reply, rpc::Done done);
  // Ends the leases in, and returns, every bundle held here that is not in
  // bundles_in_use. InvalidArgument (nothing returned) when an entry has a
  // malformed group id or a negative index.
  void HandleReleaseUnusedBundles(const rpc::ReleaseUnusedBundlesRequest& request,
                                  rpc::ReleaseUnusedBundlesReply* reply, rpc::Done done);

 private:
  // Ends the leases in `keys` (bundles held here), returns the bundles and
  // re-examines waiting leases.
  void Return(const std::vector<BundleKey>& keys);

  const BundleManagerOptions options_;
  LocalResourceManager* const local_;
  LeaseManager* const leases_;
  // The loop thread, which every handler runs on.
  ThreadChecker thread_;
};

}  // namespace manta::raylet
