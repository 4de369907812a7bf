#include "manta/internal/function_registry.h"

#include <map>

#include "absl/container/flat_hash_map.h"
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

void FunctionRegistry::RegisterActorFactory(const std::string& name, const void* key,
                                            ActorFactoryInvoker invoker) {
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

const FunctionInvoker* FunctionRegistry::FindFunction(const std::string& name) const {
  auto it = impl_->functions.find(name);
  return it == impl_->functions.end() ? nullptr : &it->second;
}

const ActorFactoryInvoker* FunctionRegistry::FindActorFactory(const std::string& name) const {
  auto it = impl_->factories.find(name);
  return it == impl_->factories.end() ? nullptr : &it->second;
}

const ActorMethodInvoker* FunctionRegistry::FindActorMethod(const std::string& name) const {
  auto it = impl_->methods.find(name);
  return it == impl_->methods.end() ? nullptr : &it->second;
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
