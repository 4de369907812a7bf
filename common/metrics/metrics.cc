#include "common/metrics/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace manta::metrics {
namespace {

Labels Zip(const std::vector<std::string>& names, const std::vector<std::string>& values) {
  Labels out;
  for (size_t i = 0; i < names.size(); ++i) out.emplace_back(names[i], i < values.size() ? values[i] : "");
  return out;
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) return absl::StrCat(static_cast<int64_t>(value));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", value);
  return buf;
}

void Exposition::Family(const std::string& name, const std::string& type, const std::string& help) {
  std::string escaped;
  for (char c : help) escaped += c == '\n' ? std::string("\\n") : c == '\\' ? std::string("\\\\") : std::string(1, c);
  absl::StrAppend(&out_, "# HELP ", name, " ", escaped, "\n# TYPE ", name, " ", type, "\n");
}

void Exposition::Sample(const std::string& name, const Labels& labels, double value) {
  out_ += name;
  char sep = '{';
  auto add = [&](const std::pair<std::string, std::string>& label) {
    absl::StrAppend(&out_, std::string(1, sep), label.first, "=\"", EscapeLabelValue(label.second), "\"");
    sep = ',';
  };
  for (const auto& label : labels) add(label);
  for (const auto& label : *constant_) add(label);
  if (sep == ',') out_ += '}';
  absl::StrAppend(&out_, " ", FormatValue(value), "\n");
}

ScalarFamily::ScalarFamily(std::string type, std::string name, std::string help, std::vector<std::string> label_names)
    : type_(std::move(type)), name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}

void ScalarFamily::Update(const std::vector<std::string>& values, const std::function<void(double&)>& update) {
  absl::MutexLock lock(&mu_);
  update(series_[values]);
}

void ScalarFamily::Render(Exposition& out) const {
  out.Family(name_, type_, help_);
  absl::MutexLock lock(&mu_);
  for (const auto& [values, value] : series_) out.Sample(name_, Zip(label_names_, values), value);
}

void Counter::Add(const std::vector<std::string>& values, double by) {
  Update(values, [by](double& count) { count += std::max(0.0, by); });
}

void Gauge::Set(const std::vector<std::string>& values, double value) {
  Update(values, [value](double& current) { current = value; });
}

Histogram::Histogram(std::string name, std::string help, std::vector<std::string> label_names,
                     std::vector<double> bounds)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      bounds_(std::move(bounds)) {}

void Histogram::Observe(const std::vector<std::string>& values, double value) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  absl::MutexLock lock(&mu_);
  Series& s = series_[values];
  if (s.buckets.empty()) s.buckets.assign(bounds_.size() + 1, 0);
  ++s.buckets[bucket];
  s.sum += value;
  ++s.count;
}

void Histogram::Render(Exposition& out) const {
  out.Family(name_, "histogram", help_);
  absl::MutexLock lock(&mu_);
  for (const auto& [values, s] : series_) {
    Labels labels = Zip(label_names_, values);
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += s.buckets[i];
      Labels with_le = labels;
      with_le.emplace_back("le", i < bounds_.size() ? FormatValue(bounds_[i]) : "+Inf");
      out.Sample(name_ + "_bucket", with_le, static_cast<double>(cumulative));
    }
    out.Sample(name_ + "_sum", labels, s.sum);
    out.Sample(name_ + "_count", labels, static_cast<double>(s.count));
  }
}

Counter* MetricsRegistry::AddCounter(std::string name, std::string help, std::vector<std::string> label_names) {
  auto counter = std::make_unique<Counter>(std::move(name), std::move(help), std::move(label_names));
  Counter* raw = counter.get();
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(counter));
  return raw;
}

Gauge* MetricsRegistry::AddGauge(std::string name, std::string help, std::vector<std::string> label_names) {
  auto gauge = std::make_unique<Gauge>(std::move(name), std::move(help), std::move(label_names));
  Gauge* raw = gauge.get();
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(gauge));
  return raw;
}

Histogram* MetricsRegistry::AddHistogram(std::string name, std::string help, std::vector<std::string> label_names,
                                         std::vector<double> bounds) {
  auto histogram =
      std::make_unique<Histogram>(std::move(name), std::move(help), std::move(label_names), std::move(bounds));
  Histogram* raw = histogram.get();
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(histogram));
  return raw;
}

void MetricsRegistry::AddCollector(Collector collector) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collector));
}

std::string MetricsRegistry::Render() const {
  absl::MutexLock render(&render_mu_);
  Exposition out(&constant_);
  std::vector<Collector> collectors;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& family : families_) family->Render(out);
    collectors = collectors_;
  }
  for (const auto& collect : collectors) collect(out);
  return out.Take();
}

}  // namespace manta::metrics
