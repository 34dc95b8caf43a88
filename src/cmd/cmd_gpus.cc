// lathe gpus
#include <cstdio>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/common/units.h"
#include "lathe/run/event_text.h"

namespace lathe::cmd {
namespace {
std::string Num(const Json& j, const char* key, const char* suffix) {
  if (!j.contains(key) || !j[key].is_number() || j[key].get<double>() < 0) return "-";
  return std::to_string(j[key].get<int64_t>()) + suffix;
}

Status RunGpus(bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json inv, c->Get("/api/v1/gpus"));
  if (json) {
    PrintJson(inv);
    return Status::OK();
  }
  bool sim = inv.value("simulated", false);
  if (!inv.contains("gpus") || inv["gpus"].empty()) {
    std::printf(
        "%s\n",
        Tr("gpus.none", lang, {{"note", run::ReasonText(inv.value("note", ""), lang)}}).c_str());
    return Status::OK();
  }
  if (sim) std::printf("%s\n", Tr("gpus.simulated", lang).c_str());
  std::vector<std::vector<std::string>> rows(1);
  for (const char* col : {"gpu", "name", "memory", "used", "util", "temp", "allocated"}) {
    rows[0].push_back(Tr(std::string("gpus.col.") + col, lang));
  }
  for (const auto& g : inv["gpus"]) {
    auto bytes = [&](const char* k) {
      return g.contains(k) && g[k].is_number() ? FormatBytes(g[k].get<uint64_t>())
                                               : std::string("-");
    };
    std::string name = g.value("name", "");  // a simulated model's name already says so
    if (sim && !name.ends_with("(simulated)"))
      name = Tr("gpus.simulated_name", lang, {{"name", name}});
    rows.push_back({std::to_string(g.value("index", 0)), name, bytes("memory_total_bytes"),
                    bytes("memory_used_bytes"), Num(g, "utilization_gpu_pct", "%"),
                    Num(g, "temperature_c", "C"),
                    g["allocated_to"].is_string() ? g["allocated_to"].get<std::string>() : "-"});
  }
  PrintTable(rows);
  return Status::OK();
}
}  // namespace

void SetupGpus(CLI::App& app, Globals& g, Status& status) {
  static bool json = false;
  auto* sub = app.add_subcommand("gpus");
  sub->add_flag("--json", json);
  sub->callback([&status, &g] { status = RunGpus(json, g.Language()); });
}

}  // namespace lathe::cmd
