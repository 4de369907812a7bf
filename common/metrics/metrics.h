// Metrics in the Prometheus text format (version 0.0.4), named and labelled
// as Ray names them so a dashboard written for Ray reads them.
//
// A MetricsRegistry owns counter, gauge and histogram families and the
// collectors that produce series at scrape time (a GCS's actors by state, a
// raylet's resources). Every series carries the registry's constant labels
// (SessionName). Render() writes the whole exposition.
//
//   MetricsRegistry registry(Labels{{"SessionName", "session_2026-..."}});
//   Counter* finished = registry.AddCounter("ray_grpc_server_req_finished_total",
//                                           "Finished requests.", {"Method"});
//   finished->Add({"NodeInfoGcsService.grpc_server.RegisterNode"});
//   registry.AddCollector([](Exposition& out) {
//     out.Family("ray_actors", "gauge", "Actors by state.");
//     out.Sample("ray_actors", {{"Name", "Counter"}, {"State", "ALIVE"}}, 3);
//   });
//   std::string text = registry.Render();
//
// Thread-safe: families record from any thread (each under its own lock);
// collectors run on the thread that calls Render, one Render at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace manta::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

// A label value escaped for the text format (backslash, quote, newline).
std::string EscapeLabelValue(const std::string& value);
// A number as the text format writes it (NaN, +Inf, -Inf, else %.17g trimmed).
std::string FormatValue(double value);

// Where a collector writes: families (HELP and TYPE, once each) and samples.
class Exposition {
 public:
  explicit Exposition(const Labels* constant) : constant_(constant) {}
  // Starts family `name` of `type` ("counter", "gauge", "histogram").
  void Family(const std::string& name, const std::string& type, const std::string& help);
  // One sample; `name` may carry a histogram suffix (_bucket, _sum, _count).
  void Sample(const std::string& name, const Labels& labels, double value);
  // Text another Exposition with the same constant labels produced.
  void Append(const std::string& text) { out_ += text; }
  std::string Take() { return std::move(out_); }

 private:
  const Labels* const constant_;
  std::string out_;
};

// A family of series that renders itself.
class Family {
 public:
  virtual ~Family() = default;
  virtual void Render(Exposition& out) const = 0;
};

// One number per label set: the common part of counters and gauges.
class ScalarFamily : public Family {
 public:
  ScalarFamily(std::string type, std::string name, std::string help, std::vector<std::string> label_names);
  void Render(Exposition& out) const override;

 protected:
  // `update` changes the series of `values` (0 when new).
  void Update(const std::vector<std::string>& values, const std::function<void(double&)>& update);

 private:
  const std::string type_, name_, help_;
  const std::vector<std::string> label_names_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, double> series_ ABSL_GUARDED_BY(mu_);
};

// A monotonic count per label set.
class Counter final : public ScalarFamily {
 public:
  Counter(std::string name, std::string help, std::vector<std::string> label_names)
      : ScalarFamily("counter", std::move(name), std::move(help), std::move(label_names)) {}
  // Adds `by` (negative counts as 0) to the series of `values` (one per label name).
  void Add(const std::vector<std::string>& values, double by = 1);
};

// The last value set per label set.
class Gauge final : public ScalarFamily {
 public:
  Gauge(std::string name, std::string help, std::vector<std::string> label_names)
      : ScalarFamily("gauge", std::move(name), std::move(help), std::move(label_names)) {}
  void Set(const std::vector<std::string>& values, double value);
};

// Observations counted in cumulative buckets with upper bounds `bounds`
// (ascending; +Inf is implied), with their sum and count.
class Histogram final : public Family {
 public:
  Histogram(std::string name, std::string help, std::vector<std::string> label_names, std::vector<double> bounds);
  void Observe(const std::vector<std::string>& values, double value);
  void Render(Exposition& out) const override;

 private:
  struct Series {
    std::vector<uint64_t> buckets;  // per bound, not cumulative; the last is +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  const std::string name_, help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, Series> series_ ABSL_GUARDED_BY(mu_);
};

class MetricsRegistry {
 public:
  using Collector = std::function<void(Exposition& out)>;

  explicit MetricsRegistry(Labels constant = {}) : constant_(std::move(constant)) {}

  // The registry owns what these return; add them before serving.
  Counter* AddCounter(std::string name, std::string help, std::vector<std::string> label_names);
  Gauge* AddGauge(std::string name, std::string help, std::vector<std::string> label_names);
  Histogram* AddHistogram(std::string name, std::string help, std::vector<std::string> label_names,
                          std::vector<double> bounds);
  void AddCollector(Collector collector);

  // The exposition: the families in the order added, then the collectors'.
  std::string Render() const;
  const Labels& constant_labels() const { return constant_; }

 private:
  const Labels constant_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Family>> families_ ABSL_GUARDED_BY(mu_);
  std::vector<Collector> collectors_ ABSL_GUARDED_BY(mu_);
  // One Render at a time: collectors need not be reentrant.
  mutable absl::Mutex render_mu_;
};

}  // namespace manta::metrics
