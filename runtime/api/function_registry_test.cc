#include "manta/internal/function_registry.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "manta/remote.h"
#include "manta/serialization.h"

namespace manta::internal {
namespace {

int Triple(int x) { return 3 * x; }
int Throws(int x) { throw std::out_of_range("index " + std::to_string(x) + " too large"); }
absl::StatusOr<int> Checked(int x) {
  if (x < 0) return absl::InvalidArgumentError("negative");
  return x;
}

class Widget {
 public:
  static Widget* Make(std::string name) { return new Widget(std::move(name)); }
  std::string Name() const { return name_; }
  void Rename(const std::string& name) { name_ = name; }

 private:
  explicit Widget(std::string name) : name_(std::move(name)) {}
  std::string name_;
};

MANTA_REMOTE(Triple, Throws, Checked, Widget::Make, &Widget::Name, &Widget::Rename);

std::string Bytes(int v) { return *Serialize(v); }

TEST(FunctionRegistryTest, FindsByNameAndPointer) {
  auto& registry = FunctionRegistry::Instance();
  EXPECT_EQ(registry.NameOf(FunctionKey(&Triple)), "Triple");
  EXPECT_EQ(registry.NameOf(FunctionKey(&Widget::Make)), "Widget::Make");
  EXPECT_EQ(registry.NameOfMember(MemberKey(&Widget::Name)), "Widget::Name");
  EXPECT_EQ(registry.NameOfMember(MemberKey(&Widget::Rename)), "Widget::Rename");
  EXPECT_NE(registry.FindFunction("Triple"), nullptr);
  EXPECT_EQ(registry.FindFunction("Widget::Make"), nullptr);
  EXPECT_NE(registry.FindActorFactory("Widget::Make"), nullptr);
  EXPECT_NE(registry.FindActorMethod("Widget::Name"), nullptr);
  EXPECT_EQ(registry.FindFunction("Nope"), nullptr);
  EXPECT_EQ(registry.NameOf(reinterpret_cast<const void*>(&Bytes)), "");
}

TEST(FunctionRegistryTest, FunctionInvokerDecodesAndEncodes) {
  const FunctionInvoker* triple = FunctionRegistry::Instance().FindFunction("Triple");
  ASSERT_NE(triple, nullptr);
  std::string arg = Bytes(7);
  absl::StatusOr<ReturnValues> result = (*triple)({arg});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*Deserialize<int>(result->at(0)), 21);
}

TEST(FunctionRegistryTest, UserExceptionIsApplicationErrorWithNameAndMessage) {
  const FunctionInvoker* throws = FunctionRegistry::Instance().FindFunction("Throws");
  std::string arg = Bytes(9);
  absl::StatusOr<ReturnValues> result = (*throws)({arg});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(core::GetErrorType(result.status()), core::ErrorType::kApplicationError);
  EXPECT_EQ(result.status().message(), "Throws raised std::out_of_range: index 9 too large");
}

TEST(FunctionRegistryTest, ReturnedStatusIsApplicationError) {
  const FunctionInvoker* checked = FunctionRegistry::Instance().FindFunction("Checked");
  std::string good = Bytes(4), bad = Bytes(-1);
  EXPECT_EQ(*Deserialize<int>((*checked)({good})->at(0)), 4);
  absl::StatusOr<ReturnValues> result = (*checked)({bad});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(core::GetErrorType(result.status()), core::ErrorType::kApplicationError);
  EXPECT_NE(result.status().message().find("Checked returned INVALID_ARGUMENT: negative"), std::string::npos)
      << result.status();
}

TEST(FunctionRegistryTest, BadArgumentsAreErrorsNotCrashes) {
  const FunctionInvoker* triple = FunctionRegistry::Instance().FindFunction("Triple");
  EXPECT_FALSE((*triple)({}).ok());
  std::string text = *Serialize(std::string("seven"));
  absl::StatusOr<ReturnValues> result = (*triple)({text});
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("Triple: bad arguments: argument 1"), std::string::npos) << result.status();
}

TEST(FunctionRegistryTest, FactoryAndMethods) {
  auto& registry = FunctionRegistry::Instance();
  std::string name = *Serialize(std::string("gear"));
  absl::StatusOr<std::shared_ptr<void>> widget = (*registry.FindActorFactory("Widget::Make"))({name});
  ASSERT_TRUE(widget.ok());
  std::string renamed = *Serialize(std::string("cog"));
  ASSERT_TRUE((*registry.FindActorMethod("Widget::Rename"))(widget->get(), {renamed}).ok());
  absl::StatusOr<ReturnValues> result = (*registry.FindActorMethod("Widget::Name"))(widget->get(), {});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*Deserialize<std::string>(result->at(0)), "cog");
}

TEST(FunctionRegistryTest, AResolverAnswersNamesOfItsPrefixOnceEach) {
  auto& registry = FunctionRegistry::Instance();
  std::vector<std::string> asked;
  FunctionRegistry::Resolver resolver;
  resolver.function = [&](const std::string& name) -> std::optional<FunctionInvoker> {
    asked.push_back(name);
    if (name != "rt:triple") return std::nullopt;
    return *registry.FindFunction("Triple");
  };
  registry.SetResolver("rt:", resolver);
  const FunctionInvoker* first = registry.FindFunction("rt:triple");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(registry.FindFunction("rt:triple"), first);  // kept, not asked again
  EXPECT_EQ(registry.FindFunction("rt:missing"), nullptr);
  EXPECT_EQ(registry.FindFunction("other:triple"), nullptr);   // not its prefix
  EXPECT_EQ(registry.FindActorFactory("rt:triple"), nullptr);  // no factory resolver
  EXPECT_EQ(asked, (std::vector<std::string>{"rt:triple", "rt:missing"}));
  EXPECT_TRUE((*first)({Bytes(5)}).ok());
  registry.SetResolver("rt:", {});
  EXPECT_EQ(registry.FindFunction("rt:triple"), first);  // what was resolved stays
  EXPECT_EQ(registry.FindFunction("rt:other"), nullptr);
  EXPECT_EQ(asked.size(), 2u);
}

TEST(FunctionRegistryDeathTest, DuplicateNameAborts) {
  EXPECT_DEATH(FunctionRegistry::Instance().RegisterFunction("Triple", nullptr, nullptr), "registered twice");
}

}  // namespace
}  // namespace manta::internal
