#include "manta/internal/function_registry.h"

#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/check.h"

namespace manta::internal {

struct FunctionRegistry::Impl {
  absl::flat_hash_map<std::string, FunctionInvoker> functions;
  absl::flat_hash_map<std::string, ActorFactoryInvoker> factories;
  absl::flat_hash_map<std::string, ActorMethodInvoker> methods;
  // Function pointers (functions and factories) and member keys → name.
  absl::flat_hash_map<const void*, std::string> pointer_names;
  absl::flat_hash_map<std::string, std::string> member_names;

  bool Taken(const std::string& name) const {
    return functions.contains(name) || factories.contains(name) || methods.contains(name);
  }

  // Run-time names: the resolvers by prefix and what they answered (node
  // maps: a pointer handed out stays valid while others are added).
  mutable absl::Mutex mu;
  std::map<std::string, Resolver> resolvers ABSL_GUARDED_BY(mu);
  absl::node_hash_map<std::string, FunctionInvoker> resolved_functions ABSL_GUARDED_BY(mu);
  absl::node_hash_map<std::string, ActorFactoryInvoker> resolved_factories ABSL_GUARDED_BY(mu);
  absl::node_hash_map<std::string, ActorMethodInvoker> resolved_methods ABSL_GUARDED_BY(mu);

  // What `name` resolves to through `which` of its prefix's resolver, kept
  // in `cache`; null when no resolver answers.
  template <typename Invoker, typename Field>
  const Invoker* Resolve(const std::string& name, Field which,
                         absl::node_hash_map<std::string, Invoker> Impl::*cache_member) ABSL_LOCKS_EXCLUDED(mu) {
    std::function<std::optional<Invoker>(const std::string&)> resolve;
    {
      absl::MutexLock lock(&mu);
      auto& cache = this->*cache_member;
      if (auto it = cache.find(name); it != cache.end()) return &it->second;
      for (const auto& [prefix, resolver] : resolvers) {
        if (absl::StartsWith(name, prefix)) resolve = resolver.*which;
      }
    }
    if (!resolve) return nullptr;
    std::optional<Invoker> invoker = resolve(name);
    if (!invoker.has_value()) return nullptr;
    absl::MutexLock lock(&mu);
    return &(this->*cache_member).try_emplace(name, std::move(*invoker)).first->second;
  }
};

FunctionRegistry& FunctionRegistry::Instance() {
  // Never destroyed: invokers may be looked up during static destruction.
  static FunctionRegistry* registry = new FunctionRegistry();
  return *registry;
}

FunctionRegistry::FunctionRegistry() : impl_(std::make_unique<Impl>()) {}

void FunctionRegistry::RegisterFunction(const std::string& name, const void* key, FunctionInvoker invoker) {
  CHECK(!name.empty()) << "MANTA_REMOTE: empty function name";
  CHECK(!impl_->Taken(name)) << "MANTA_REMOTE: " << name << " is registered twice";
  impl_->functions.emplace(name, std::move(invoker));
  impl_->pointer_names.emplace(key, name);
}

void FunctionRegistry::RegisterActorFactory(const std::string& name, const void* key, ActorFactoryInvoker invoker) {
  CHECK(!name.empty()) << "MANTA_REMOTE: empty factory name";
  CHECK(!impl_->Taken(name)) << "MANTA_REMOTE: " << name << " is registered twice";
  impl_->factories.emplace(name, std::move(invoker));
  impl_->pointer_names.emplace(key, name);
}

void FunctionRegistry::RegisterActorMethod(const std::string& name, std::string key, ActorMethodInvoker invoker) {
  CHECK(!name.empty()) << "MANTA_REMOTE: empty method name";
  CHECK(!impl_->Taken(name)) << "MANTA_REMOTE: " << name << " is registered twice";
  impl_->methods.emplace(name, std::move(invoker));
  impl_->member_names.emplace(std::move(key), name);
}

void FunctionRegistry::SetResolver(const std::string& prefix, Resolver resolver) {
  CHECK(!prefix.empty()) << "FunctionRegistry::SetResolver: empty prefix";
  absl::MutexLock lock(&impl_->mu);
  if (!resolver.function && !resolver.factory && !resolver.method) {
    impl_->resolvers.erase(prefix);
  } else {
    impl_->resolvers[prefix] = std::move(resolver);
  }
}

const FunctionInvoker* FunctionRegistry::FindFunction(const std::string& name) const {
  auto it = impl_->functions.find(name);
  if (it != impl_->functions.end()) return &it->second;
  return impl_->Resolve(name, &Resolver::function, &Impl::resolved_functions);
}

const ActorFactoryInvoker* FunctionRegistry::FindActorFactory(const std::string& name) const {
  auto it = impl_->factories.find(name);
  if (it != impl_->factories.end()) return &it->second;
  return impl_->Resolve(name, &Resolver::factory, &Impl::resolved_factories);
}

const ActorMethodInvoker* FunctionRegistry::FindActorMethod(const std::string& name) const {
  auto it = impl_->methods.find(name);
  if (it != impl_->methods.end()) return &it->second;
  return impl_->Resolve(name, &Resolver::method, &Impl::resolved_methods);
}

std::string FunctionRegistry::NameOf(const void* key) const {
  auto it = impl_->pointer_names.find(key);
  return it == impl_->pointer_names.end() ? std::string() : it->second;
}

std::string FunctionRegistry::NameOfMember(const std::string& key) const {
  auto it = impl_->member_names.find(key);
  return it == impl_->member_names.end() ? std::string() : it->second;
}

}  // namespace manta::internal
