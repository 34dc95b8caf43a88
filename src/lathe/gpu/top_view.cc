#include "lathe/gpu/top_view.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "lathe/common/display_width.h"
#include "lathe/common/units.h"
#include "lathe/run/event_text.h"

namespace lathe::gpu {
namespace {

constexpr size_t kBarCells = 10;
constexpr int64_t kMsPerSecond = 1000;

using Rows = std::vector<std::vector<std::string>>;

// Columns two spaces apart, each as wide as its widest cell on the screen;
// `right` columns (numbers) are aligned right. No trailing spaces.
std::vector<std::string> Table(const Rows& rows, const std::vector<size_t>& right = {}) {
  std::vector<size_t> widths;
  for (const auto& r : rows) {
    if (widths.size() < r.size()) widths.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) widths[i] = std::max(widths[i], DisplayWidth(r[i]));
  }
  std::vector<std::string> out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      bool is_right = std::find(right.begin(), right.end(), i) != right.end();
      line += is_right ? PadLeft(r[i], widths[i]) : PadRight(r[i], widths[i]);
      if (i + 1 < r.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out.push_back(std::move(line));
  }
  return out;
}

std::optional<double> Number(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

std::string Pct(std::optional<double> v) {
  return v ? fmt::format("{}%", static_cast<int>(*v + 0.5)) : "-";
}

std::string Memory(std::optional<double> used, std::optional<double> total) {
  if (!used && !total) return "-";
  if (used && total) {
    auto [u, t] = FormatBytesPair(static_cast<uint64_t>(*used), static_cast<uint64_t>(*total));
    return u + "/" + t;
  }
  return used ? FormatBytes(static_cast<uint64_t>(*used)) + "/-"
              : "-/" + FormatBytes(static_cast<uint64_t>(*total));
}

std::string Power(const Json& g) {
  auto w = Number(g, "power_w"), limit = Number(g, "power_limit_w");
  if (!w) return "-";
  std::string s = fmt::format("{:.0f}W", *w);
  return limit ? s + fmt::format("/{:.0f}W", *limit) : s;
}

// The reasons other than gpu_idle (benign), "a,b"; "-" when none or unknown.
std::string Throttle(const Json& g) {
  std::string out;
  if (g.contains("throttle_reason_names") && g["throttle_reason_names"].is_array()) {
    for (const auto& r : g["throttle_reason_names"]) {
      if (!r.is_string() || r.get<std::string>() == "gpu_idle") continue;
      out += (out.empty() ? "" : ",") + r.get<std::string>();
    }
  }
  return out.empty() ? "-" : out;
}

std::string Str(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// How long a run has been in its attempt: "5m", "3 分钟".
std::string Since(int64_t started_ms, int64_t now_ms, Lang lang) {
  if (started_ms <= 0 || now_ms <= 0) return "-";
  int64_t s = std::max<int64_t>(0, (now_ms - started_ms) / kMsPerSecond);
  auto n = [](int64_t v) { return MsgArgs{{"n", std::to_string(v)}}; };
  if (s < 60) return Tr("time.seconds", lang, n(s));
  if (s < 3600) return Tr("time.minutes", lang, n(s / 60));
  if (s < 86400) return Tr("time.hours", lang, n(s / 3600));
  return Tr("time.days", lang, n(s / 86400));
}

std::string HeldBy(const Json& g, const std::map<std::string, const Json*>& runs, Lang lang) {
  std::string err = Str(g, "error");
  if (!err.empty()) return Tr("top.gpu_error", lang, {{"error", err}});
  std::string id = Str(g, "allocated_to");
  if (id.empty()) return Tr("top.free", lang);
  auto it = runs.find(id);
  if (it == runs.end()) return id;
  std::string name = Str(*it->second, "name"), user = Str(*it->second, "user");
  if (name.empty() || name == id)
    return Tr("top.held_unnamed", lang, {{"run", id}, {"user", user}});
  return Tr("top.held", lang, {{"run", id}, {"name", name}, {"user", user}});
}

std::vector<std::string> GpuLines(const Json& gpus, const std::map<std::string, const Json*>& runs,
                                  Lang lang) {
  Rows rows(1);
  for (const char* col : {"gpu", "name", "util", "memory", "temp", "power", "throttle", "held"}) {
    rows[0].push_back(Tr(std::string("top.col.") + col, lang));
  }
  for (const auto& g : gpus) {
    auto util = Number(g, "utilization_gpu_pct");
    auto temp = Number(g, "temperature_c");
    rows.push_back({std::to_string(g.value("index", 0)), Str(g, "name"),
                    UtilizationBar(util ? static_cast<int>(*util) : -1, kBarCells) + " " +
                        PadLeft(Pct(util), 4),
                    Memory(Number(g, "memory_used_bytes"), Number(g, "memory_total_bytes")),
                    temp ? fmt::format("{:.0f}C", *temp) : "-", Power(g), Throttle(g),
                    HeldBy(g, runs, lang)});
  }
  return Table(rows, {0});
}

// The runs holding GPUs, in the order of their first GPU, each with the
// mean utilization and the memory of its GPUs.
std::vector<std::string> RunLines(const Json& runs, const Json& gpus, int64_t now_ms, Lang lang) {
  std::map<int, const Json*> by_index;
  for (const auto& g : gpus) by_index[g.value("index", -1)] = &g;
  std::vector<const Json*> holding;
  for (const auto& r : runs) {
    if (r.contains("gpus") && r["gpus"].is_array() && !r["gpus"].empty() &&
        Str(r, "state") != "queued")
      holding.push_back(&r);
  }
  std::sort(holding.begin(), holding.end(), [](const Json* a, const Json* b) {
    return (*a)["gpus"][0].get<int>() < (*b)["gpus"][0].get<int>();
  });
  if (holding.empty()) return {Tr("top.no_runs", lang)};
  Rows rows(1);
  for (const char* col : {"run", "name", "user", "state", "gpus", "util", "memory", "time"}) {
    rows[0].push_back(Tr(std::string("top.col.") + col, lang));
  }
  for (const Json* r : holding) {
    std::string list;
    double util_sum = 0, used = 0, total = 0;
    int util_n = 0;
    bool have_used = false, have_total = false;
    for (const auto& i : (*r)["gpus"]) {
      list += (list.empty() ? "" : ",") + std::to_string(i.get<int>());
      auto it = by_index.find(i.get<int>());
      if (it == by_index.end()) continue;
      if (auto u = Number(*it->second, "utilization_gpu_pct")) util_sum += *u, util_n++;
      if (auto m = Number(*it->second, "memory_used_bytes")) used += *m, have_used = true;
      if (auto m = Number(*it->second, "memory_total_bytes")) total += *m, have_total = true;
    }
    rows.push_back({Str(*r, "id"), Str(*r, "name"), Str(*r, "user"),
                    run::StateLabel(Str(*r, "state"), lang), list,
                    Pct(util_n ? std::optional<double>(util_sum / util_n) : std::nullopt),
                    Memory(have_used ? std::optional<double>(used) : std::nullopt,
                           have_total ? std::optional<double>(total) : std::nullopt),
                    Since(r->value("started_at_ms", int64_t{0}), now_ms, lang)});
  }
  return Table(rows, {5});
}

}  // namespace

std::string UtilizationBar(int pct, size_t cells) {
  if (pct < 0) return "[" + std::string(cells, ' ') + "]";
  size_t filled = static_cast<size_t>(std::min(100, pct)) * cells / 100;
  if (pct > 0 && filled == 0) filled = 1;  // busy at all: one cell
  return "[" + std::string(filled, '#') + std::string(cells - filled, '.') + "]";
}

std::vector<std::string> RenderTop(const TopInput& in, Lang lang, size_t width) {
  static const Json kEmpty = Json::array();
  const Json& gpus =
      in.gpus.contains("gpus") && in.gpus["gpus"].is_array() ? in.gpus["gpus"] : kEmpty;
  const Json& runs =
      in.runs.contains("runs") && in.runs["runs"].is_array() ? in.runs["runs"] : kEmpty;
  std::map<std::string, const Json*> by_id;
  std::map<std::string, int> queued;  // priority -> runs
  int running = 0, held = 0, waiting = 0;
  for (const auto& r : runs) {
    by_id[Str(r, "id")] = &r;
    std::string st = Str(r, "state");
    if (st == "queued") queued[Str(r, "priority")]++, waiting++;
    if (st == "running") running++;
  }
  for (const auto& g : gpus) held += g.contains("allocated_to") && g["allocated_to"].is_string();

  std::vector<std::string> lines;
  lines.push_back(Tr("top.summary", lang,
                     {{"gpus", std::to_string(gpus.size())},
                      {"held", std::to_string(held)},
                      {"running", std::to_string(running)},
                      {"queued", std::to_string(waiting)}}));
  if (in.gpus.value("simulated", false)) lines.push_back(Tr("top.simulated", lang));
  lines.emplace_back();
  if (gpus.empty()) {
    lines.push_back(
        Tr("top.no_gpus", lang, {{"note", run::ReasonText(Str(in.gpus, "note"), lang)}}));
  } else {
    for (auto& l : GpuLines(gpus, by_id, lang)) lines.push_back(std::move(l));
  }
  lines.emplace_back();
  for (auto& l : RunLines(runs, gpus, in.now_ms, lang)) lines.push_back(std::move(l));
  lines.emplace_back();
  lines.push_back(Tr("top.queue", lang,
                     {{"n", std::to_string(waiting)},
                      {"high", std::to_string(queued["high"])},
                      {"normal", std::to_string(queued["normal"])},
                      {"low", std::to_string(queued["low"])}}));
  if (width > 0) {
    for (auto& l : lines) l = FitWidth(l, width);
  }
  return lines;
}

}  // namespace lathe::gpu
