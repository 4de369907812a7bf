// Names of remote functions: parsing MANTA_REMOTE's text and looking up the
// name of a function the caller passes.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "manta/actor.h"
#include "manta/errors.h"
#include "manta/remote.h"
#include "manta/serialization.h"
#include "manta/task_caller.h"
#include "manta/internal/function_registry.h"

namespace manta::internal {
namespace {

std::string Clean(std::string_view text) {
  std::string name;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) name.push_back(c);
  }
  if (!name.empty() && name.front() == '&') name.erase(0, 1);
  return name;
}

}  // namespace

std::vector<std::string> SplitRemoteNames(std::string_view spelled) {
  std::vector<std::string> names;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= spelled.size(); ++i) {
    const char c = i < spelled.size() ? spelled[i] : ',';
    if (c == '(' || c == '<' || c == '[') ++depth;
    if (c == ')' || c == '>' || c == ']') --depth;
    if (c == ',' && depth <= 0) {
      std::string name = Clean(spelled.substr(start, i - start));
      if (!name.empty()) names.push_back(std::move(name));
      start = i + 1;
    }
  }
  return names;
}

void RegistrationFailure(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::abort();
}

std::string RemoteFunctionName(const void* key, const std::type_info& type) {
  const FunctionRegistry& registry = FunctionRegistry::Instance();
  std::string name = registry.NameOf(key);
  if (name.empty()) {
    throw Error(absl::NotFoundError(
        absl::StrCat("manta::Task: this function (", TypeName(type), ") is not remote; add it to MANTA_REMOTE(...)")));
  }
  if (registry.FindFunction(name) == nullptr) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat("manta::Task: ", name, " is an actor factory; create actors with manta::Actor(", name, ")")));
  }
  return name;
}

std::string RemoteFactoryName(const void* key, const std::type_info& type) {
  const FunctionRegistry& registry = FunctionRegistry::Instance();
  std::string name = registry.NameOf(key);
  if (name.empty()) {
    throw Error(absl::NotFoundError(
        absl::StrCat("manta::Actor: this factory (", TypeName(type), ") is not remote; add it to MANTA_REMOTE(...)")));
  }
  if (registry.FindActorFactory(name) == nullptr) {
    throw Error(absl::InvalidArgumentError(absl::StrCat("manta::Actor: ", name, " is not an actor factory")));
  }
  return name;
}

std::string RemoteMethodName(const std::string& key, const std::type_info& type) {
  std::string name = FunctionRegistry::Instance().NameOfMember(key);
  if (name.empty()) {
    throw Error(absl::NotFoundError(absl::StrCat("ActorHandle::Task: this method (", TypeName(type),
                                                 ") is not remote; add it to MANTA_REMOTE(...)")));
  }
  return name;
}

std::string ClassNameOfFactory(const std::string& factory_name, const std::string& fallback) {
  size_t at = factory_name.rfind("::");
  if (at == std::string::npos || at == 0) return fallback;
  return factory_name.substr(0, at);
}

}  // namespace manta::internal

namespace manta::internal {

absl::StatusOr<std::string> CallLocal(const std::string& name, const std::vector<std::string>& args) {
  const FunctionInvoker* f = FunctionRegistry::Instance().FindFunction(name);
  if (f == nullptr) return absl::NotFoundError("no remote function '" + name + "' in this program");
  ArgViews views(args.begin(), args.end());
  absl::StatusOr<ReturnValues> values = (*f)(views);
  if (!values.ok()) return values.status();
  if (values->size() != 1) {
    return absl::InternalError("'" + name + "' returned " + std::to_string(values->size()) + " values, not one");
  }
  return std::move(values->front());
}

}  // namespace manta::internal
