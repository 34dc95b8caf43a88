// lathe __relay (internal): a command deployment's replica (gateway/relay.h,
// docs/deployments.md "Command deployments"), the run's first process:
//   lathe __relay --socket SOCK [--port P] -- CMD ARGS...
//   lathe __relay --socket SOCK [--port P] --beside   (CMD runs in an image
//                                                      beside it; until SIGTERM)
// Creates the unix listener SOCK, starts CMD with PORT=P (and LATHE_PORT),
// relays each connection on SOCK to 127.0.0.1:P, and exits with CMD's exit
// status (128+N when a signal N ended it). P defaults to $PORT, which the
// daemon's backend sets to where the run's port listens. Parsed by hand,
// before CLI11 (main.cc): CMD's words are never lathe's options.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cmd/commands.h"
#include "lathe/common/i18n.h"
#include "lathe/common/log.h"
#include "lathe/gateway/relay.h"

namespace lathe::cmd {
namespace {

Status BadFlag(const std::string& flag, const std::string& value) {
  return Status::Msg(Code::kInvalidArgument, "relay.bad_flag", {{"flag", flag}, {"value", value}});
}

Result<int> PortOf(const std::string& v, const std::string& flag) {
  char* end = nullptr;
  long p = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || p < 1 || p > 65535) return BadFlag(flag, v);
  return static_cast<int>(p);
}

Result<int> Relay(int argc, char** argv) {
  gateway::RelayOptions o;
  std::string port;
  bool beside = false;
  int i = 2;  // argv[1] is "__relay"
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (a == "--beside") {
      beside = true;
      continue;
    }
    std::string* out = a == "--socket" ? &o.socket_path : a == "--port" ? &port : nullptr;
    if (out == nullptr || i + 1 >= argc) return BadFlag(a, i + 1 < argc ? argv[i + 1] : "");
    *out = argv[++i];
  }
  if (o.socket_path.empty()) return BadFlag("--socket", "");
  if (beside == (i + 1 < argc)) return BadFlag("--", beside ? argv[i + 1] : "");
  if (port.empty()) {
    const char* env = std::getenv("PORT");
    ASSIGN_OR_RETURN(o.port, PortOf(env ? env : "", "$PORT"));
  } else {
    ASSIGN_OR_RETURN(o.port, PortOf(port, "--port"));
  }
  if (beside) {
    RETURN_IF_ERROR(gateway::RunRelayBeside(o));
    return 0;
  }
  ASSIGN_OR_RETURN(os::ExitStatus es,
                   gateway::RunRelayed(o, std::vector<std::string>(argv + i + 1, argv + argc)));
  return es.exited ? es.code : 128 + es.signal;
}

}  // namespace

int RelayMain(int argc, char** argv) {
  InitLogging("info");
  auto code = Relay(argc, argv);
  if (code.ok()) return *code;
  std::fprintf(stderr, "lathe __relay: %s\n", Localize(code.status(), DetectLang()).c_str());
  return code.status().code() == Code::kInvalidArgument ? 2 : 1;
}

}  // namespace lathe::cmd
