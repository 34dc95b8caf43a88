// The Prometheus registry of `lathe serve`: common/prometheus.h, shared with
// the deployments' front (gateway/front_metrics.h).
#pragma once

#include "lathe/common/prometheus.h"

namespace lathe::serve {

using prom::Labels;
using prom::Metrics;
using prom::RenderLabels;

}  // namespace lathe::serve
