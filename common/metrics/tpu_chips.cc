#include "common/metrics/tpu_chips.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"

namespace manta::metrics {
namespace {

constexpr double kNanos = 1e9;

bool Alive(uint64_t pid) {
  if (pid == 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

double Percent(double part, double whole) { return whole > 0 ? std::clamp(100.0 * part / whole, 0.0, 100.0) : 0.0; }

}  // namespace

std::string ChipPagePath(const std::string& stats_dir, int chip) { return absl::StrCat(stats_dir, "/chip-", chip); }

uint64_t MonotonicNanos() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

absl::StatusOr<std::unique_ptr<ChipActivity>> ChipActivity::Open(const std::string& stats_dir, int chip) {
  auto page = StatsPage::Open(ChipPagePath(stats_dir, chip));
  if (!page.ok()) return page.status();
  (*page)->Write([](StatsPage::Slots& s) {
    // A step its previous holder left under way never ended.
    s[kChipBusySince] = 0;
    s[kChipBytesHeld] = 0;
    s[kChipWriterPid] = static_cast<uint64_t>(::getpid());
  });
  return std::unique_ptr<ChipActivity>(new ChipActivity(std::move(*page)));
}

ChipActivity::~ChipActivity() {
  page_->Write([](StatsPage::Slots& s) {
    if (s[kChipBusySince] != 0) s[kChipBusyNanos] += MonotonicNanos() - s[kChipBusySince];
    s[kChipBusySince] = 0;
    s[kChipBytesHeld] = 0;
  });
}

void ChipActivity::StepBegan() {
  page_->Write([](StatsPage::Slots& s) { s[kChipBusySince] = MonotonicNanos(); });
}

void ChipActivity::StepEnded(double transfer_seconds, int64_t bytes_held) {
  page_->Write([&](StatsPage::Slots& s) {
    const uint64_t now = MonotonicNanos();
    if (s[kChipBusySince] != 0 && now > s[kChipBusySince]) {
      const uint64_t step = now - s[kChipBusySince];
      s[kChipBusyNanos] += step;
      // What the step spent on exchanges, at most all of it.
      s[kChipTransferNanos] +=
          std::min<uint64_t>(step, static_cast<uint64_t>(std::max(0.0, transfer_seconds) * kNanos));
    }
    s[kChipBusySince] = 0;
    s[kChipBytesHeld] = static_cast<uint64_t>(std::max<int64_t>(0, bytes_held));
  });
}

ChipReading ReadChip(const StatsPage::Values& v, uint64_t now_nanos, bool writer_alive) {
  ChipReading r;
  uint64_t busy = v[kChipBusyNanos];
  if (writer_alive && v[kChipBusySince] != 0 && now_nanos > v[kChipBusySince]) busy += now_nanos - v[kChipBusySince];
  r.busy_seconds = static_cast<double>(busy) / kNanos;
  r.transfer_seconds = static_cast<double>(v[kChipTransferNanos]) / kNanos;
  r.bytes_held = writer_alive ? static_cast<int64_t>(v[kChipBytesHeld]) : 0;
  return r;
}

ChipUtilization ChipMeter::Update(uint64_t now_nanos, const ChipReading& r) {
  ChipUtilization u;
  if (has_previous_ && now_nanos > at_ && r.busy_seconds >= previous_.busy_seconds &&
      r.transfer_seconds >= previous_.transfer_seconds) {
    const double seconds = static_cast<double>(now_nanos - at_) / kNanos;
    const double busy = r.busy_seconds - previous_.busy_seconds;
    const double transfer = std::min(busy, r.transfer_seconds - previous_.transfer_seconds);
    u.duty_cycle = Percent(busy, seconds);
    u.tensorcore = Percent(busy - transfer, seconds);
    u.bandwidth = Percent(transfer, seconds);
  }
  has_previous_ = true;
  at_ = now_nanos;
  previous_ = r;
  return u;
}

TpuChipStats::TpuChipStats(Host host, std::string stats_dir)
    : host_(std::move(host)), dir_(std::move(stats_dir)), meters_(std::max(0, host_.chips)) {}

void TpuChipStats::Collect(Exposition& out) {
  struct Chip {
    ChipUtilization u;
    int64_t bytes = 0;
  };
  std::vector<Chip> chips(static_cast<size_t>(std::max(0, host_.chips)));
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < chips.size(); ++i) {
      // A chip no process has held yet has no page: idle.
      auto page = ReadStatsPage(ChipPagePath(dir_, static_cast<int>(i)));
      const uint64_t now = MonotonicNanos();
      ChipReading r;
      if (page.ok()) r = ReadChip(*page, now, Alive((*page)[kChipWriterPid]));
      chips[i].u = meters_[i].Update(now, r);
      chips[i].bytes = r.bytes_held;
    }
  }
  const std::string help_tail =
      " On hosts without TPUs a chip is a logical device of the training kernels, computing on the CPU.";
  const struct {
    const char* name;
    std::string help;
    std::function<double(const Chip&)> value;
  } kFamilies[] = {
      {"ray_tpu_tensorcore_utilization", "Percent of the time since the previous scrape the chip computed." + help_tail,
       [](const Chip& c) { return c.u.tensorcore; }},
      {"ray_tpu_memory_bandwidth_utilization",
       "Percent of the time since the previous scrape the chip moved its arrays to or from its peers." + help_tail,
       [](const Chip& c) { return c.u.bandwidth; }},
      {"ray_tpu_duty_cycle",
       "Percent of the time since the previous scrape the chip ran training steps (computing or exchanging)." +
           help_tail,
       [](const Chip& c) { return c.u.duty_cycle; }},
      {"ray_tpu_memory_used", "Bytes the arrays on the chip hold." + help_tail,
       [](const Chip& c) { return static_cast<double>(c.bytes); }},
      {"ray_tpu_memory_total",
       "Bytes of memory the chip may hold: the host's memory shared among its chips." + help_tail,
       [this](const Chip&) { return static_cast<double>(host_.memory_per_chip); }},
  };
  for (const auto& family : kFamilies) {
    out.Family(family.name, "gauge", family.help);
    for (size_t i = 0; i < chips.size(); ++i) {
      out.Sample(family.name,
                 {{"ip", host_.ip},
                  {"TpuIndex", std::to_string(i)},
                  {"TpuDeviceName", absl::StrCat(host_.device_prefix, "-", i)},
                  {"TpuType", host_.type},
                  {"TpuTopology", host_.topology}},
                 family.value(chips[i]));
    }
  }
}

}  // namespace manta::metrics
