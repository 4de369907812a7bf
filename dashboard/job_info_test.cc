#include "dashboard/job_info.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace manta::dashboard {
namespace {

TEST(ParseSubmitRequestTest, AcceptsRaysRequestShape) {
  auto req = ParseSubmitRequest(R"({
      "entrypoint": "echo hello",
      "runtime_env": {"working_dir": "gcs://_manta_pkg_abc.tar.gz", "env_vars": {"A": "1", "B_2": "x"}},
      "job_id": null,
      "submission_id": "my-job",
      "metadata": {"owner": "me"},
      "entrypoint_num_cpus": 1.5,
      "entrypoint_resources": {"TPU": 4}})");
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->entrypoint, "echo hello");
  EXPECT_EQ(req->submission_id, "my-job");
  EXPECT_EQ(req->working_dir_package, "_manta_pkg_abc.tar.gz");
  EXPECT_EQ(req->env_vars.at("A"), "1");
  EXPECT_EQ(req->metadata.at("owner"), "me");
  EXPECT_DOUBLE_EQ(*req->entrypoint_num_cpus, 1.5);
  auto demand = EntrypointResourceMap(*req);
  EXPECT_DOUBLE_EQ(demand.at("CPU"), 1.5);
  EXPECT_DOUBLE_EQ(demand.at("TPU"), 4);
}

TEST(ParseSubmitRequestTest, DeprecatedJobIdIsTheSubmissionId) {
  auto req = ParseSubmitRequest(R"({"entrypoint": "true", "job_id": "old-style"})");
  ASSERT_TRUE(req.ok());
  EXPECT_EQ(req->submission_id, "old-style");
}

TEST(ParseSubmitRequestTest, RejectsBadInputWithClearMessages) {
  struct Case {
    const char* body;
    const char* message_part;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"{not json", "not valid JSON"},
           {"[1, 2]", "JSON object"},
           {"{}", "'entrypoint' is required"},
           {R"({"entrypoint": "  "})", "empty"},
           {R"({"entrypoint": 5})", "'entrypoint' is required"},
           {R"({"entrypoint": "x", "bogus": 1})", "unknown field 'bogus'"},
           {R"({"entrypoint": "x", "submission_id": "../../etc"})", "invalid submission id"},
           {R"({"entrypoint": "x", "runtime_env": {"pip": ["numpy"]}})", "'pip' is not supported"},
           {R"({"entrypoint": "x", "runtime_env": {"working_dir": "/home/me"}})", "gcs://"},
           {R"({"entrypoint": "x", "runtime_env": {"working_dir": "gcs://../x.tar"}})", "invalid package name"},
           {R"({"entrypoint": "x", "runtime_env": {"env_vars": {"A=B": "1"}}})", "not a variable name"},
           {R"({"entrypoint": "x", "runtime_env": {"env_vars": {"A": 1}}})", "must be a string"},
           {R"({"entrypoint": "x", "metadata": {"k": 1}})", "must be a string"},
           {R"({"entrypoint": "x", "entrypoint_num_cpus": -1})", "entrypoint_num_cpus"},
           {R"({"entrypoint": "x", "entrypoint_num_cpus": "2"})", "must be a number"},
           {R"({"entrypoint": "x", "entrypoint_num_cpus": 1e300})", "entrypoint_num_cpus"},
           {R"({"entrypoint": "x", "entrypoint_resources": {"TPU": -4}})", "entrypoint_resources.TPU"},
           {R"({"entrypoint": "x", "entrypoint_resources": {"CPU": 1}})", "entrypoint_num_cpus"},
           {R"({"entrypoint": "x", "entrypoint_resources": {"": 1}})", "entrypoint_resources"},
           {R"({"entrypoint": "x", "entrypoint_resources": {"CPU_group_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": 1}})",
            "placement-group resource"},
       }) {
    auto req = ParseSubmitRequest(c.body);
    ASSERT_FALSE(req.ok()) << c.body;
    EXPECT_EQ(req.status().code(), absl::StatusCode::kInvalidArgument) << c.body;
    EXPECT_NE(std::string(req.status().message()).find(c.message_part), std::string::npos)
        << c.body << " -> " << req.status().message();
  }
}

TEST(ParseSubmitRequestTest, InvalidUtf8AnywhereIsRefusedAsSuch) {
  const std::string bad = "\xff";
  for (const std::string& body :
       {R"({"entrypoint": "echo )" + bad + R"("})", R"({"entrypoint": "x", "submission_id": "id)" + bad + R"("})",
        R"({"entrypoint": "x", "metadata": {"k": ")" + bad + R"("}})",
        R"({"entrypoint": "x", "metadata": {")" + bad + R"(": "v"}})",
        R"({"entrypoint": "x", "entrypoint_resources": {")" + bad + R"(": 1}})",
        R"({"entrypoint": "x", "runtime_env": {"env_vars": {"A": ")" + bad + R"("}}})"}) {
    auto req = ParseSubmitRequest(body);
    ASSERT_FALSE(req.ok()) << body;
    EXPECT_EQ(req.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(req.status().message(), "the request body is not valid UTF-8");
  }
  // Escaped lone surrogates are not text either.
  auto req = ParseSubmitRequest(R"({"entrypoint": "echo \ud800"})");
  ASSERT_FALSE(req.ok());
  EXPECT_EQ(req.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParseSubmitRequestTest, EntrypointQuantitiesAboveTheMaximumAreRefused) {
  for (const char* field : {"entrypoint_num_cpus", "entrypoint_num_gpus", "entrypoint_memory"}) {
    auto req = ParseSubmitRequest(absl::StrCat(R"({"entrypoint": "x", ")", field, R"(": 1e15})"));
    ASSERT_FALSE(req.ok()) << field;
    EXPECT_EQ(req.status().message(), absl::StrCat("'", field, "': quantity 1e+15 is larger than the maximum 9e+14"));
  }
  auto req = ParseSubmitRequest(R"({"entrypoint": "x", "entrypoint_resources": {"TPU": 9.3e14}})");
  ASSERT_FALSE(req.ok());
  EXPECT_EQ(req.status().message(), "'entrypoint_resources.TPU': quantity 9.3e+14 is larger than the maximum 9e+14");
}

TEST(JobRecordTest, StoredFormRoundTripsAndApiFormHidesInternals) {
  auto req = ParseSubmitRequest(R"({"entrypoint": "sleep 1", "metadata": {"a": "b"}, "entrypoint_num_cpus": 2})");
  ASSERT_TRUE(req.ok());
  JobRecord job = NewJobRecord(*req, "mantasubmit_x", 1000);
  job.status = JobStatus::kRunning;
  job.runner_pid = 42;
  job.runner_start_ticks = 777;
  job.driver_node_ip = "127.0.0.1";
  job.stop_requested = true;
  job.stopped_by_shutdown = true;
  auto back = FromStoredJson(ToStoredJson(job));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->status, JobStatus::kRunning);
  EXPECT_TRUE(back->stop_requested);
  EXPECT_TRUE(back->stopped_by_shutdown);
  EXPECT_EQ(back->runner_pid, 42);
  EXPECT_EQ(back->runner_start_ticks, 777u);
  EXPECT_EQ(back->metadata.at("a"), "b");
  EXPECT_DOUBLE_EQ(*back->entrypoint_num_cpus, 2);

  nlohmann::json api = ToApiJson(job);
  for (const char* key : {"type", "job_id", "submission_id", "driver_info", "status", "entrypoint", "message",
                          "error_type", "start_time", "end_time", "metadata", "runtime_env"}) {
    EXPECT_TRUE(api.contains(key)) << key;
  }
  EXPECT_EQ(api["type"], "SUBMISSION");
  EXPECT_EQ(api["status"], "RUNNING");
  EXPECT_EQ(api["driver_info"]["pid"], "42");
  EXPECT_FALSE(api.contains("manta"));
  EXPECT_FALSE(FromStoredJson("{}").ok());
  EXPECT_FALSE(FromStoredJson("garbage").ok());
}

TEST(DumpJsonTest, InvalidUtf8IsReplacedNotThrown) {
  nlohmann::json j = {{"logs", std::string("ok \xff\xfe bytes")}};
  std::string text = DumpJson(j);
  EXPECT_NE(text.find("ok "), std::string::npos);
}

}  // namespace
}  // namespace manta::dashboard
