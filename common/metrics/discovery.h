// Where a metrics target that is not a node makes itself known to the head:
// the dashboard puts its metrics address ("host:port") in the GCS's internal
// KV under this namespace and key, and the GCS lists it among the targets of
// its service-discovery file (gcs/gcs_metrics.h).
//
//   request.set_ns(metrics::kMetricsKvNamespace);
//   request.set_key(metrics::kDashboardMetricsKey);
//   request.set_value("10.0.0.1:8081");
#pragma once

namespace manta::metrics {

inline constexpr char kMetricsKvNamespace[] = "metrics";
inline constexpr char kDashboardMetricsKey[] = "dashboard";

}  // namespace manta::metrics
