// lathe top
#include <signal.h>
#include <time.h>

#include <chrono>
#include <cstdio>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/common/units.h"
#include "lathe/gpu/top_view.h"
#include "lathe/os/terminal.h"

namespace lathe::cmd {
namespace {

constexpr int64_t kMinIntervalMs = 100;
constexpr int64_t kMaxIntervalMs = 3600 * 1000;
// The terminal's alternate screen, with the cursor hidden, and back.
constexpr const char* kEnterScreen = "\x1b[?1049h\x1b[?25l";
constexpr const char* kLeaveScreen = "\x1b[?25h\x1b[?1049l";
constexpr const char* kHome = "\x1b[H";
constexpr const char* kClearLineEnd = "\x1b[K";
constexpr const char* kClearBelow = "\x1b[J";

struct TopOptions {
  std::string interval = "2s";
  bool once = false;
  bool json = false;  // one snapshot as {"gpus": GET /gpus, "runs": GET /runs, "at_ms"}
};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One frame from the API: the GPUs (with who holds them) and the runs.
Result<gpu::TopInput> Fetch(api::ApiClient& c) {
  gpu::TopInput in;
  ASSIGN_OR_RETURN(in.gpus, c.Get("/api/v1/gpus"));
  ASSIGN_OR_RETURN(in.runs, c.Get("/api/v1/runs"));
  in.now_ms = NowMs();
  return in;
}

Status PrintOnce(api::ApiClient& c, bool json, Lang lang) {
  ASSIGN_OR_RETURN(gpu::TopInput in, Fetch(c));
  if (json) {
    PrintJson(Json{
        {"gpus", in.gpus}, {"runs", in.runs.value("runs", Json::array())}, {"at_ms", in.now_ms}});
    return Status::OK();
  }
  for (const auto& l : gpu::RenderTop(in, lang)) std::printf("%s\n", l.c_str());
  return Status::OK();
}

// Draws frames in place on the alternate screen until SIGINT, SIGTERM or
// SIGHUP; the terminal is given back as it was in every case. The signals are
// blocked and waited for between frames, so none ends the process mid-frame.
Status Live(api::ApiClient& c, int64_t interval_ms, const std::string& interval, Lang lang) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGWINCH}) sigaddset(&set, s);
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &set, &old);
  std::fputs(kEnterScreen, stdout);
  while (true) {
    size_t width = static_cast<size_t>(os::StdoutColumns().value_or(0));
    std::vector<std::string> lines;
    auto in = Fetch(c);
    if (in.ok()) {
      lines = gpu::RenderTop(*in, lang, width);
    } else {
      lines = {Tr("top.unreachable", lang, {{"error", Localize(in.status(), lang)}})};
    }
    lines.push_back(Tr("top.refresh", lang, {{"interval", interval}}));
    std::string frame = kHome;
    for (const auto& l : lines) frame += l + kClearLineEnd + "\n";
    frame += kClearBelow;
    std::fputs(frame.c_str(), stdout);
    std::fflush(stdout);
    timespec ts{static_cast<time_t>(interval_ms / 1000),
                static_cast<long>((interval_ms % 1000) * 1'000'000)};
    int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) break;
    // SIGWINCH or the interval: the next frame, at the new width.
  }
  std::fputs(kLeaveScreen, stdout);
  std::fflush(stdout);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return Status::OK();
}

Status RunTop(const TopOptions& o, Lang lang) {
  auto interval = ParseDuration(o.interval);
  if (!interval.ok() || interval->count() < kMinIntervalMs || interval->count() > kMaxIntervalMs) {
    return Status::Msg(Code::kInvalidArgument, "top.bad_interval", {{"value", o.interval}});
  }
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  if (o.once || o.json || !IsTerminal()) return PrintOnce(*c, o.json, lang);
  return Live(*c, interval->count(), o.interval, lang);
}

}  // namespace

void SetupTop(CLI::App& app, Globals& g, Status& status) {
  static TopOptions o;
  auto* sub = app.add_subcommand("top");
  sub->add_option("--interval", o.interval);
  sub->add_flag("--once", o.once);
  sub->add_flag("--json", o.json);
  sub->callback([&status, &g] { status = RunTop(o, g.Language()); });
}

}  // namespace lathe::cmd
