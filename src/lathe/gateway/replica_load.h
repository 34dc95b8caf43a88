// What a replica says of its own load, read from its Prometheus text
// (`lathe serve`'s /metrics, docs/serving.md): the requests waiting in its
// queues and those it is computing. The front reads it with each health
// probe (front.h); the autoscaler counts a replica's load as
//   max(requests in flight at the front, running + queued)
// because a request queued in a replica's batcher is in flight at the front
// too (autoscaler.h). Pure; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace lathe::gateway {

inline constexpr std::string_view kQueueMetric = "lathe_serve_queue_length";
inline constexpr std::string_view kInFlightMetric = "lathe_serve_inflight_requests";

struct ReplicaLoad {
  int64_t queued = 0;   // Σ lathe_serve_queue_length over its models, versions and priorities
  int64_t running = 0;  // Σ lathe_serve_inflight_requests (which counts the queued ones too)
                        // less `queued`, at least 0: admitted and being computed
};

// The sums over every sample of the two metrics. nullopt when the text has
// no sample of lathe_serve_queue_length (a program that is not `lathe
// serve`: its figure is then the front's alone). Samples that are not
// finite numbers are skipped.
std::optional<ReplicaLoad> ParseReplicaLoad(std::string_view text);

}  // namespace lathe::gateway
