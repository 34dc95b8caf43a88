// The HTTP transport of a Slurm pool's slurmrestd (exec/slurm/slurm_rest.h),
// over net::HttpClient: exec does not link an HTTP client, the composition
// root hands it this one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lathe/common/status.h"
#include "lathe/exec/slurm/slurm_rest.h"

namespace lathe::node {

// `url`: "http://host:port" (or https://) or "unix:/path/to/socket";
// InvalidArgument for anything else. Each Post opens its own connection
// (one submission at a time per thread; no state shared between threads),
// bounded by `timeout_ms`.
Result<std::unique_ptr<exec::SlurmRestTransport>> MakeSlurmRestTransport(const std::string& url,
                                                                         int64_t timeout_ms);

}  // namespace lathe::node
