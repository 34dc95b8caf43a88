// GET /api/v1/runs/{run}/metrics and GET /api/v1/gpus/history: the GPU
// telemetry per run and the machine's GPUs over the last samples
// (docs/telemetry.md). A run's metrics are read as its logs are: by its
// owner and admins alone.
#include "lathe/api/routes.h"
#include "lathe/api/server.h"

namespace lathe::api {

void ApiServer::GetRunMetrics(ApiCall& call) {
  auto since = QueryNumber(call.req, "since", 0, INT64_MAX);
  if (!since.ok()) return call.Reply(since.status());
  call.Reply(daemon_.RunMetrics(call.caller, call.Param("run"), *since));
}

void ApiServer::GetGpuHistory(ApiCall& call) {
  auto since = QueryNumber(call.req, "since", 0, INT64_MAX);
  if (!since.ok()) return call.Reply(since.status());
  call.Reply(daemon_.GpuHistory(*since));
}

}  // namespace lathe::api
