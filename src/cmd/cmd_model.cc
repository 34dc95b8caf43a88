// lathe model create | ls | show | alias | rm | export: the model registry
// (docs/deployments.md). The rules are the daemon's (daemon/models.cc);
// this file parses, calls and prints.
#include <cstdio>
#include <filesystem>
#include <string>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/common/units.h"
#include "lathe/deploy/models.h"
#include "lathe/net/http.h"

namespace lathe::cmd {
namespace {

struct ModelFlags {
  std::string name, ref, alias, from, from_snapshot, from_dir, file, handler, backend, note, to;
  int64_t version = 0;
  bool is_public = false, json = false, force = false;
};

std::string Short(const std::string& id) { return id.substr(0, 12); }

std::string Path(const std::string& name) { return "/api/v1/models/" + net::PercentEncode(name); }

// A directory as the daemon must see it: absolute, from where the CLI runs.
std::string Absolute(const std::string& dir) {
  if (dir.empty() || dir[0] == '/') return dir;
  std::error_code ec;
  auto abs = std::filesystem::absolute(dir, ec);
  return ec ? dir : abs.lexically_normal().string();
}

Status RunCreate(const ModelFlags& f, Lang lang) {
  Json body = {{"name", f.name}};
  if (!f.from.empty()) body["from_run"] = f.from;
  if (!f.from_snapshot.empty()) body["from_snapshot"] = f.from_snapshot;
  if (!f.from_dir.empty()) body["from_dir"] = Absolute(f.from_dir);
  if (!f.file.empty()) body["file"] = f.file;
  if (!f.handler.empty()) body["handler"] = f.handler;
  if (!f.backend.empty()) body["backend"] = f.backend;
  if (!f.note.empty()) body["note"] = f.note;
  if (f.is_public) body["public"] = true;
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Post("/api/v1/models", body));
  if (f.json) {
    PrintJson(r);
    return Status::OK();
  }
  std::string file =
      r.value("backend", "") == "process" ? r.value("handler", "") : r.value("file", "");
  std::printf("%s\n", Tr("model.created", lang,
                         {{"ref", r.value("ref", "")},
                          {"snapshot", Short(r.value("snapshot", ""))},
                          {"backend", r.value("backend", "")},
                          {"file", file}})
                          .c_str());
  return Status::OK();
}

Status RunList(const ModelFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Get("/api/v1/models"));
  if (f.json) {
    PrintJson(r["models"]);
    return Status::OK();
  }
  if (r["models"].empty()) {
    std::printf("%s\n", Tr("model.none", lang).c_str());
    return Status::OK();
  }
  std::vector<std::vector<std::string>> rows = {
      {Tr("model.col_name", lang), Tr("model.col_owner", lang), Tr("model.col_versions", lang),
       Tr("model.col_latest", lang), Tr("model.col_aliases", lang), Tr("model.col_public", lang),
       Tr("model.col_created", lang)}};
  for (const auto& m : r["models"]) {
    std::string aliases;
    for (const auto& [a, v] : m["aliases"].items())
      aliases += (aliases.empty() ? "" : ",") + a + "=" + std::to_string(v.get<int64_t>());
    rows.push_back({m.value("name", ""), m.value("owner", ""),
                    std::to_string(m.value("versions", 0)),
                    m["latest"].is_number() ? std::to_string(m["latest"].get<int64_t>()) : "-",
                    aliases.empty() ? "-" : aliases,
                    Tr(m.value("public", false) ? "model.yes" : "model.no", lang),
                    AgeAgo(m.value("created_at_ms", int64_t{0}), lang)});
  }
  AddSharedColumn(rows, r["models"], 2, lang);
  PrintTable(rows);
  return Status::OK();
}

void PrintLineage(const Json& l, Lang lang) {
  auto line = [&](const char* id, const std::string& value) {
    if (!value.empty()) std::printf("  %s%s\n", Label(Tr(id, lang), 20).c_str(), value.c_str());
  };
  auto text = [&](const char* key) {
    if (!l.contains(key)) return std::string();
    return l[key].is_string() ? l[key].get<std::string>() : l[key].dump();
  };
  line("model.lineage_run",
       text("run") + (l.contains("run_name") ? " (" + text("run_name") + ")" : ""));
  line("model.lineage_attempt", text("attempt"));
  line("model.lineage_step", text("step"));
  line("model.lineage_checkpoint", text("checkpoint_file"));
  line("model.lineage_dir", text("source_dir"));
  line("model.lineage_commit", text("workspace_commit"));
}

void PrintVersion(const Json& v, Lang lang) {
  auto field = [&](const char* id, const std::string& value) {
    std::printf("%s%s\n", Label(Tr(id, lang), 22).c_str(), value.empty() ? "-" : value.c_str());
  };
  std::string aliases;
  for (const auto& a : v["aliases"])
    aliases += (aliases.empty() ? "" : ", ") + a.get<std::string>();
  field("model.field_version", v.value("ref", ""));
  field("model.field_owner",
        v.value("owner", "") +
            (v.value("public", false) ? " (" + Tr("model.public", lang) + ")" : ""));
  field("model.field_aliases", aliases);
  field("model.field_backend", v.value("backend", ""));
  field("model.field_file", v.value("file", ""));
  field("model.field_handler", v.value("handler", ""));
  field("model.field_snapshot", v.value("snapshot", ""));
  field("model.field_size", v.contains("size") ? FormatBytes(v["size"].get<uint64_t>()) + " (" +
                                                     std::to_string(v.value("file_count", 0)) + ")"
                                               : "");
  // The signature, as the first replica of the version described it ("-" while unknown).
  auto tensors = [](const Json& list) {
    std::string s;
    if (!list.is_array()) return s;
    for (const auto& t : list) {
      std::string shape;
      for (const auto& d : t.value("shape", Json::array()))
        shape += (shape.empty() ? "" : ",") + d.dump();
      s += (s.empty() ? "" : ", ") + t.value("name", "") + " " + t.value("datatype", "") + "[" +
           shape + "]";
    }
    return s;
  };
  field("model.field_inputs", tensors(v.value("inputs", Json())));
  field("model.field_outputs", tensors(v.value("outputs", Json())));
  field("model.field_note", v.value("note", ""));
  field("model.field_created",
        v.value("created_by", "") + ", " + AgeAgo(v.value("created_at_ms", int64_t{0}), lang));
  std::string deployments;
  for (const auto& d : v.value("deployments", Json::array()))
    deployments += (deployments.empty() ? "" : ", ") + d.get<std::string>();
  field("model.field_deployments", deployments);
  std::printf("%s\n", Tr("model.field_lineage", lang).c_str());
  PrintLineage(v["lineage"], lang);
  if (v.contains("files")) {
    std::printf("%s\n", Tr("model.field_files", lang).c_str());
    for (const auto& file : v["files"]) {
      std::printf("  %10s  %s\n", FormatBytes(file.value("size", uint64_t{0})).c_str(),
                  file.value("path", "").c_str());
    }
  }
}

Status RunShow(const ModelFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(deploy::ModelRef ref, deploy::ParseModelRef(f.ref));
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  std::string path = ref.version ? Path(ref.name) + "/versions/" + std::to_string(*ref.version)
                                 : "/api/v1/models/" + net::PercentEncode(f.ref);
  ASSIGN_OR_RETURN(Json r, c->Get(path));
  if (f.json) {
    PrintJson(r);
    return Status::OK();
  }
  if (r.contains("version")) {
    PrintVersion(r, lang);
    return Status::OK();
  }
  std::printf("%s%s\n", Label(Tr("model.field_name", lang), 22).c_str(),
              r.value("name", "").c_str());
  std::printf("%s%s\n", Label(Tr("model.field_owner", lang), 22).c_str(),
              (r.value("owner", "") +
               (r.value("public", false) ? " (" + Tr("model.public", lang) + ")" : ""))
                  .c_str());
  if (r["versions"].empty()) {
    std::printf("%s\n", Tr("model.no_versions_yet", lang).c_str());
    return Status::OK();
  }
  std::vector<std::vector<std::string>> rows = {
      {Tr("model.col_version", lang), Tr("model.col_aliases", lang), Tr("model.col_backend", lang),
       Tr("model.col_file", lang), Tr("model.col_source", lang), Tr("model.col_created", lang)}};
  for (const auto& v : r["versions"]) {
    std::string aliases;
    for (const auto& a : v["aliases"])
      aliases += (aliases.empty() ? "" : ",") + a.get<std::string>();
    const Json& l = v["lineage"];
    std::string source = l.contains("run") ? l["run"].get<std::string>() +
                                                 (l.contains("step") ? "@" + l["step"].dump() : "")
                         : l.contains("source_dir") ? l["source_dir"].get<std::string>()
                                                    : Short(v.value("snapshot", ""));
    std::string file =
        v.value("backend", "") == "process" ? v.value("handler", "") : v.value("file", "");
    rows.push_back({std::to_string(v.value("version", 0)), aliases.empty() ? "-" : aliases,
                    v.value("backend", ""), file, source,
                    AgeAgo(v.value("created_at_ms", int64_t{0}), lang)});
  }
  PrintTable(rows);
  return Status::OK();
}

Status RunAlias(const ModelFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Put(Path(f.name) + "/aliases/" + net::PercentEncode(f.alias),
                                  Json{{"version", f.version}}));
  std::string ref = f.name + "/" + std::to_string(f.version);
  if (f.json) {
    PrintJson(r);
    return Status::OK();
  }
  if (r["previous"].is_number()) {
    std::printf("%s\n", Tr("model.alias_moved", lang,
                           {{"alias", f.name + "@" + f.alias},
                            {"ref", ref},
                            {"previous", std::to_string(r["previous"].get<int64_t>())}})
                            .c_str());
  } else {
    std::printf(
        "%s\n",
        Tr("model.alias_set", lang, {{"alias", f.name + "@" + f.alias}, {"ref", ref}}).c_str());
  }
  return Status::OK();
}

Result<deploy::ModelRef> VersionRef(const std::string& text) {
  ASSIGN_OR_RETURN(deploy::ModelRef ref, deploy::ParseModelRef(text));
  if (!ref.version) {
    return Status::Msg(Code::kInvalidArgument, "model.needs_version", {{"value", text}});
  }
  return ref;
}

Status RunRemove(const ModelFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(deploy::ModelRef ref, VersionRef(f.ref));
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Delete(Path(ref.name) + "/versions/" + std::to_string(*ref.version)));
  if (f.json) {
    PrintJson(r);
    return Status::OK();
  }
  std::printf("%s\n", Tr("model.removed", lang,
                         {{"ref", f.ref}, {"snapshot", Short(r.value("snapshot", ""))}})
                          .c_str());
  return Status::OK();
}

Status RunExport(const ModelFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(deploy::ModelRef ref, deploy::ParseModelRef(f.ref));
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  if (!ref.alias.empty()) {  // the version the alias points at now
    ASSIGN_OR_RETURN(Json v, c->Get("/api/v1/models/" + net::PercentEncode(f.ref)));
    ref.version = v.value("version", int64_t{0});
  }
  if (!ref.version)
    return Status::Msg(Code::kInvalidArgument, "model.needs_version", {{"value", f.ref}});
  ASSIGN_OR_RETURN(Json r,
                   c->Post(Path(ref.name) + "/versions/" + std::to_string(*ref.version) + "/export",
                           Json{{"to", Absolute(f.to)}, {"force", f.force}}));
  if (f.json) {
    PrintJson(r);
    return Status::OK();
  }
  std::printf("%s\n", Tr("model.exported", lang,
                         {{"ref", f.ref},
                          {"path", r.value("path", "")},
                          {"files", std::to_string(r.value("files", 0))},
                          {"bytes", FormatBytes(r.value("bytes", uint64_t{0}))},
                          {"repository", r.value("repository", "")}})
                          .c_str());
  return Status::OK();
}

}  // namespace

void SetupModel(CLI::App& app, Globals& g, Status& status) {
  static ModelFlags f;
  auto* model = app.add_subcommand("model");
  model->require_subcommand(1);
  auto bind = [&](CLI::App* sub, Status (*fn)(const ModelFlags&, Lang)) {
    sub->callback([&status, &g, fn] { status = fn(f, g.Language()); });
  };

  auto* create = model->add_subcommand("create");
  create->add_option("name", f.name)->required();
  create->add_option("--from", f.from);
  create->add_option("--from-snapshot", f.from_snapshot);
  create->add_option("--from-dir", f.from_dir);
  create->add_option("--file", f.file);
  create->add_option("--handler", f.handler);
  create->add_option("--backend", f.backend);
  create->add_option("--note", f.note);
  create->add_flag("--public", f.is_public);
  create->add_flag("--json", f.json);
  bind(create, RunCreate);

  auto* ls = model->add_subcommand("ls");
  ls->add_flag("--json", f.json);
  bind(ls, RunList);

  auto* show = model->add_subcommand("show");
  show->add_option("model", f.ref)->required();
  show->add_flag("--json", f.json);
  bind(show, RunShow);

  auto* alias = model->add_subcommand("alias");
  alias->add_option("name", f.name)->required();
  alias->add_option("alias", f.alias)->required();
  alias->add_option("version", f.version)->required();
  alias->add_flag("--json", f.json);
  bind(alias, RunAlias);

  auto* rm = model->add_subcommand("rm");
  rm->add_option("version", f.ref)->required();
  rm->add_flag("--json", f.json);
  bind(rm, RunRemove);

  auto* exp = model->add_subcommand("export");
  exp->add_option("version", f.ref)->required();
  exp->add_option("--to", f.to)->required();
  exp->add_flag("--force", f.force);
  exp->add_flag("--json", f.json);
  bind(exp, RunExport);
}

}  // namespace lathe::cmd
