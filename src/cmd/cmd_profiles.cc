// lathe profiles [--json]
#include <cstdio>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/common/units.h"

namespace lathe::cmd {
namespace {

std::string Field(const Json& fields, const char* key) {
  if (!fields.contains(key)) return "-";
  const Json& v = fields[key];
  if ((std::string_view(key) == "memory" || std::string_view(key) == "shm") && v.is_number()) {
    return FormatBytes(v.get<uint64_t>());
  }
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// "2 × A100", "1", "-".
std::string Gpus(const Json& fields) {
  std::string n = Field(fields, "gpus");
  if (!fields.contains("gpu_type")) return n;
  return (n == "-" ? "1" : n) + " × " + fields["gpu_type"].get<std::string>();
}

std::string Fits(const Json& p, Lang lang) {
  std::string fits = p.value("fits", "unknown");
  if (fits == "yes") return Tr("profiles.fits.yes", lang);
  if (fits != "no" && fits != "never") return Tr("profiles.fits.unknown", lang);
  std::string why = "-";
  if (p.contains("reason") && p["reason"].is_object()) {
    const Json& r = p["reason"];
    MsgArgs args;
    const Json given = r.value("args", Json::object());
    for (const auto& [k, v] : given.items()) {
      args.push_back({k, v.is_string() ? v.get<std::string>() : v.dump()});
    }
    std::string id = r.value("msg_id", "");
    why = Catalog::Default().Has(id) ? Tr(id, lang, args) : r.value("message", "-");
  }
  return Tr("profiles.fits." + fits, lang, {{"why", why}});
}

Status RunProfiles(bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Get("/api/v1/profiles"));
  if (json) {
    PrintJson(r["profiles"]);
    return Status::OK();
  }
  if (!r.contains("profiles") || r["profiles"].empty()) {
    std::printf("%s\n", Tr("profiles.none", lang).c_str());
    return Status::OK();
  }
  std::vector<std::vector<std::string>> rows(1);
  for (const char* col : {"name", "gpus", "nodes", "cpus", "memory", "shm", "pool", "fits"}) {
    rows[0].push_back(Tr(std::string("profiles.col.") + col, lang));
  }
  for (const auto& p : r["profiles"]) {
    const Json fields = p.value("fields", Json::object());
    std::string pool = p.value("pool", "-");
    if (fields.contains("partition")) pool += "/" + fields["partition"].get<std::string>();
    rows.push_back({p.value("name", ""), Gpus(fields), Field(fields, "nodes"),
                    Field(fields, "cpus"), Field(fields, "memory"), Field(fields, "shm"), pool,
                    Fits(p, lang)});
  }
  PrintTable(rows);
  return Status::OK();
}

}  // namespace

void SetupProfiles(CLI::App& app, Globals& g, Status& status) {
  static bool json = false;
  auto* sub = app.add_subcommand("profiles");
  sub->add_flag("--json", json);
  sub->callback([&status, &g] { status = RunProfiles(json, g.Language()); });
}

}  // namespace lathe::cmd
