#include "common/logging.h"

#include "absl/base/attributes.h"
#include "absl/synchronization/mutex.h"
#include "spdlog/sinks/basic_file_sink.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace manta {
namespace {

// Guards Sink() and Level() (function statics, so usable during static
// initialization).
ABSL_CONST_INIT absl::Mutex g_mu(absl::kConstInit);

spdlog::sink_ptr& Sink() {
  static spdlog::sink_ptr sink;
  return sink;
}

spdlog::level::level_enum& Level() {
  static spdlog::level::level_enum level = spdlog::level::info;
  return level;
}

}  // namespace

void InitLogging(const LoggingOptions& options) {
  absl::MutexLock lock(&g_mu);
  if (options.log_file.empty()) {
    Sink() = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    Sink() = std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.log_file);
  }
  Level() = options.level;
  spdlog::apply_all([&](std::shared_ptr<spdlog::logger> l) {
    l->sinks() = {Sink()};
    l->set_level(options.level);
  });
  spdlog::flush_on(spdlog::level::info);
}

std::shared_ptr<spdlog::logger> Logger(const std::string& component) {
  if (auto l = spdlog::get(component)) return l;
  absl::MutexLock lock(&g_mu);
  if (auto l = spdlog::get(component)) return l;
  if (!Sink()) Sink() = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>(component, Sink());
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] [pid %P] %v");
  logger->set_level(Level());
  logger->flush_on(spdlog::level::info);
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace manta
