#include "cli/job_request.h"

#include <cmath>
#include <limits>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace manta::cli {
namespace {

JobSubmitOptions Options() {
  JobSubmitOptions o;
  o.entrypoint = {"python", "run.py", "--name", "it's"};
  return o;
}

void ExpectRefused(const JobSubmitOptions& o, const std::string& message_start) {
  auto r = BuildSubmitRequest(o);
  ASSERT_FALSE(r.ok()) << r->body.dump();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(r.status().message(), message_start)) << r.status();
}

TEST(BuildSubmitRequestTest, ValidFlagsMakeTheBody) {
  JobSubmitOptions o = Options();
  o.submission_id = "my-job";
  o.runtime_env_json = R"({"env_vars": {"A": "1"}})";
  o.metadata_json = R"({"owner": "me \u00e9"})";
  o.entrypoint_resources = R"({"TPU": 4})";
  o.entrypoint_num_cpus = 1.5;
  o.entrypoint_memory = 0;
  auto r = BuildSubmitRequest(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body["entrypoint"], "python run.py --name 'it'\\''s'");
  EXPECT_EQ(r->body["submission_id"], "my-job");
  EXPECT_EQ(r->body["metadata"]["owner"], "me \xc3\xa9");
  EXPECT_EQ(r->body["entrypoint_resources"]["TPU"], 4);
  EXPECT_EQ(r->body["entrypoint_num_cpus"], 1.5);
  EXPECT_EQ(r->body["entrypoint_memory"], 0);
  EXPECT_FALSE(r->body.contains("entrypoint_num_gpus"));
  EXPECT_EQ(r->runtime_env["env_vars"]["A"], "1");
  EXPECT_NO_THROW(r->body.dump());
}

TEST(BuildSubmitRequestTest, NonUtf8InputIsRefusedNotThrown) {
  JobSubmitOptions entry = Options();
  entry.entrypoint.push_back("caf\xff");
  ExpectRefused(entry, "the entrypoint is not valid UTF-8 (word 5 after --)");
  JobSubmitOptions id = Options();
  id.submission_id = "job\xff";
  ExpectRefused(id, "--submission-id: invalid submission id 'job?'");
  JobSubmitOptions metadata = Options();
  metadata.metadata_json = "{\"owner\": \"\xff\"}";
  ExpectRefused(metadata, "--metadata-json is not valid UTF-8");
  JobSubmitOptions env = Options();
  env.runtime_env_json = "{\"env_vars\": {\"A\": \"\xfe\"}}";
  ExpectRefused(env, "--runtime-env-json is not valid UTF-8");
  JobSubmitOptions resources = Options();
  resources.entrypoint_resources = "{\"\xff\": 1}";
  ExpectRefused(resources, "--entrypoint-resources is not valid UTF-8");
}

TEST(BuildSubmitRequestTest, NanInfiniteNegativeAndHugeQuantitiesAreRefused) {
  const double kNan = std::nan("");
  const double kInf = std::numeric_limits<double>::infinity();
  struct Case {
    double value;
    const char* message_part;
  };
  for (const Case& c : std::initializer_list<Case>{{kNan, "quantity is NaN"},
                                                   {kInf, "quantity is infinite"},
                                                   {-kInf, "quantity is infinite"},
                                                   {-1, "quantity -1 is negative"},
                                                   {1e15, "quantity 1e+15 is larger than the maximum 9e+14"}}) {
    for (auto [flag, field] : {std::pair{"--entrypoint-num-cpus", &JobSubmitOptions::entrypoint_num_cpus},
                               std::pair{"--entrypoint-num-gpus", &JobSubmitOptions::entrypoint_num_gpus},
                               std::pair{"--entrypoint-memory", &JobSubmitOptions::entrypoint_memory}}) {
      JobSubmitOptions o = Options();
      o.*field = c.value;
      ExpectRefused(o, std::string(flag) + ": " + c.message_part);
    }
  }
}

TEST(BuildSubmitRequestTest, BadEntrypointResourcesAreRefused) {
  struct Case {
    const char* json;
    const char* message;
  };
  for (const Case& c : std::initializer_list<Case>{
           {R"({"TPU": NaN})", "--entrypoint-resources: NaN is not a quantity"},
           {R"({"TPU": Infinity})", "--entrypoint-resources: infinite quantities are not allowed"},
           {R"({"TPU": 1e999})", "--entrypoint-resources: quantity 1e999 is infinite"},
           {R"({"TPU": -4})", "--entrypoint-resources: resource 'TPU': quantity -4 is negative"},
           {R"({"TPU": 1e15})", "--entrypoint-resources: resource 'TPU': quantity 1e+15 is larger than the maximum"},
           {R"({"TPU": "4"})", "--entrypoint-resources: resource 'TPU' must be a number, got \"4\""},
           {R"({"TPU": null})", "--entrypoint-resources: resource 'TPU' must be a number, got null"},
           {R"([4])", "--entrypoint-resources must be a JSON object"}}) {
    JobSubmitOptions o = Options();
    o.entrypoint_resources = c.json;
    ExpectRefused(o, c.message);
  }
}

TEST(BuildSubmitRequestTest, NoEntrypoint) {
  JobSubmitOptions o;
  ExpectRefused(o, "give the entrypoint after --");
}

}  // namespace
}  // namespace manta::cli
