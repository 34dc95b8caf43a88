// The network and environment group: proxies, DNS, interface MTUs and the
// NCCL_* variables.
#pragma once

#include <string>
#include <string_view>

#include "lathe/doctor/check.h"

namespace lathe::doctor {

Finding CheckProxy(const SystemView& view, const Facts& facts);
Finding CheckDns(const SystemView& view, const Facts& facts);
Finding CheckMtu(const SystemView& view, const Facts& facts);
Finding CheckNccl(const SystemView& view, const Facts& facts);

// Whether a no_proxy value exempts `host` ("localhost", "127.0.0.1") from
// the proxy: an entry "*", the host itself (also with a leading '.'), or an
// IPv4 CIDR block holding it ("127.0.0.0/8"). Exposed for tests.
bool NoProxyCovers(std::string_view no_proxy, std::string_view host);

}  // namespace lathe::doctor
