// A run's ports (spec `ports`, docs/ports.md): the environment that tells the
// program where to listen, and the layered answer to "why does my port not
// answer" that the proxy's error page and `lathe inspect` give.
//
// Where a tcp port listens: on the host network, a free loopback port the
// daemon's backend allocated (127.0.0.1:41234); on an isolated network (a
// namespace of the run's own), the declared port itself. The program is
// told through
//   LATHE_PORT_<declared port>   every tcp port ("LATHE_PORT_6006=41234")
//   LATHE_PORT_<NAME>            a tcp port named in the spec ({name: tb}: LATHE_PORT_TB)
//   PORT                         the main (first) port, when it is tcp
//   LATHE_SOCKET_<NAME>          a unix socket port: its path
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/os/listening.h"
#include "lathe/run/spec.h"

namespace lathe::run {

// The variable that names where `p` listens: LATHE_PORT_6006 or LATHE_SOCKET_WEB.
std::string PortEnvName(const PortSpec& p);
// The variables above for `ports`; `listen_ports[i]` is where the tcp port
// ports[i] listens (ignored for a socket). Sizes must match.
std::map<std::string, std::string> PortEnvironment(const std::vector<PortSpec>& ports,
                                                   const std::vector<int>& listen_ports);

// Which layer keeps a port from answering, outermost first.
enum class PortState {
  kNotRunning,    // the run is queued or ended
  kNotListening,  // nothing listens at the port's address (yet)
  kElsewhere,     // the run listens, but on other addresses or ports
  kWrongOwner,    // another user's process holds the address
  kListening,     // something of the run's user answers there
};
std::string_view PortStateName(PortState s);  // "not_running", "not_listening", ...

struct PortCheck {
  PortState state = PortState::kNotListening;
  std::vector<std::string> run_listens;  // what the run's processes listen on
  uid_t other_uid = 0;                   // kWrongOwner: who holds the address
};

// Classifies a port of an active run. `kind` "tcp" (address
// "127.0.0.1:41234") or "unix" (a path); `run_listeners`: what the run's
// processes hold (os::ListenersOf); `all_listeners`: every listener of the
// run's network namespace (os::NamespaceListeners). A tcp listener answers
// 127.0.0.1:P when bound to 127.0.0.1, 0.0.0.0, :: or ::ffff:127.0.0.1 on P.
// A process of `run_uid` or of `also_uid` (for a root run the daemon's own
// user; else run_uid again) may serve it.
PortCheck CheckPort(std::string_view kind, std::string_view address, uid_t run_uid, uid_t also_uid,
                    const std::vector<os::Listener>& run_listeners,
                    const std::vector<os::Listener>& all_listeners);

// The person-facing explanation of `check` for run `run_id`'s port `p`
// served at `address` (catalog ids ports.*, docs/ports.md); OK for kListening.
// Args: run, port, address, env, layer (PortStateName), listening (the
// run's addresses, ", "-joined, "-" when none), uid, doctor.
Status ExplainPort(const std::string& run_id, const PortSpec& p, std::string_view address,
                   const PortCheck& check);
// For a run that is not active: ports.not_running with its state.
Status ExplainNotRunning(const std::string& run_id, const PortSpec& p, std::string_view state);

// The doctor's check of a client's proxy variables, named on every page.
inline constexpr std::string_view kProxyCheckCommand = "lathe doctor --only network";

}  // namespace lathe::run
