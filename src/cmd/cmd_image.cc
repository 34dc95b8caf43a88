// lathe image pull | build | import | ls | inspect | rm | prune: container images for runs
// (docs/environments.md). The daemon reads an imported file as the caller,
// so a path is sent as an absolute path, never the file's bytes.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/common/units.h"
#include "lathe/net/http.h"
#include "lathe/os/terminal.h"

namespace lathe::cmd {
namespace {

std::string ShortId(const std::string& id) { return id.substr(0, 12); }

std::string Size(const Json& v) {
  const uint64_t b = v.value("size_bytes", uint64_t{0});
  return b == 0 ? "-" : FormatBytes(b);
}

// The queued and active runs in an image: "-", "r-1", "r-1 r-2 r-3 (+2)".
std::string Runs(const Json& v) {
  const Json& runs = v.contains("runs") && v["runs"].is_array() ? v["runs"] : Json::array();
  if (runs.empty()) return "-";
  std::string out;
  for (size_t i = 0; i < runs.size() && i < 3; ++i) {
    out += (i ? " " : "") + runs[i].get<std::string>();
  }
  if (runs.size() > 3) out += " (+" + std::to_string(runs.size() - 3) + ")";
  return out;
}

// The image an import or a pull answered, as JSON or one line (`msg`).
void PrintImage(const Json& r, const char* msg, const std::string& fallback, bool json, Lang lang) {
  if (json) return PrintJson(r);
  std::printf("%s\n", Tr(msg, lang,
                         {{"name", r.value("name", fallback)},
                          {"id", ShortId(r.value("id", ""))},
                          {"size", Size(r)}})
                          .c_str());
}

// A build's or a pull's output as it comes, on stderr; on a terminal with a
// progress line below it (`msg`: the build's step, or the layers a pull has
// copied; the time so far), redrawn at each line.
class StreamProgress {
 public:
  StreamProgress(std::string name, const char* msg, Lang lang)
      : name_(std::move(name)),
        msg_(msg),
        lang_(lang),
        tty_(os::StderrIsTerminal()),
        start_(std::chrono::steady_clock::now()) {}
  void Line(const std::string& line) {
    if (line.starts_with("STEP ")) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) step_ = line.substr(5, colon - 5);
    } else if (line.starts_with("Copying blob ")) {
      step_ = std::to_string(++blobs_);
    }
    if (tty_) std::fputs("\r\033[K", stderr);
    std::fprintf(stderr, "%s\n", line.c_str());
    if (tty_) Draw();
  }
  void Done() {
    if (tty_) std::fputs("\r\033[K", stderr);
  }

 private:
  void Draw() {
    const auto secs =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start_)
            .count();
    std::fprintf(
        stderr, "%s",
        Tr(msg_, lang_,
           {{"name", name_}, {"step", step_.empty() ? "-" : step_}, {"secs", std::to_string(secs)}})
            .c_str());
    std::fflush(stderr);
  }
  const std::string name_;
  const char* msg_;
  const Lang lang_;
  const bool tty_;
  const std::chrono::steady_clock::time_point start_;
  std::string step_;
  int blobs_ = 0;
};

// POSTs `body` to a streamed pull or build (`path`), shows its output as it
// comes (`progress` the status line's message), then prints the image it made
// (`done`).
Status StreamImage(const std::string& path, const Json& body, const std::string& name,
                   const char* progress_msg, const char* done, bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  StreamProgress progress(name, progress_msg, lang);
  auto r = c->PostForResult(path, body, [&](const std::string& event, const Json& data) {
    if (event == "log") progress.Line(data.value("line", ""));
  });
  progress.Done();
  if (!r.ok()) return r.status();
  PrintImage(*r, done, name, json, lang);
  return Status::OK();
}

Status RunImport(const std::string& name, const std::string& file, bool json, Lang lang) {
  const std::string path = std::filesystem::absolute(file).lexically_normal().string();
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Post("/api/v1/images/import", Json{{"name", name}, {"path", path}}));
  PrintImage(r, "image.imported", name, json, lang);
  return Status::OK();
}

Status RunPull(const std::string& ref, const std::string& name, const std::string& secret,
               bool insecure, bool json, Lang lang) {
  Json body = {{"ref", ref}};
  if (!name.empty()) body["name"] = name;
  if (!secret.empty()) body["secret"] = secret;
  if (insecure) body["insecure"] = true;
  std::fprintf(stderr, "%s\n", Tr("image.pulling", lang, {{"ref", ref}}).c_str());
  // As events: a pull of many gigabytes takes longer than a request may.
  return StreamImage("/api/v1/images/pull?stream=1", body, ref, "image.pull_progress",
                     "image.pulled", json, lang);
}

Status RunBuild(const std::string& name, const std::string& dir, const std::string& file, bool json,
                Lang lang) {
  Json body = {{"name", name}, {"dir", std::filesystem::absolute(dir).lexically_normal().string()}};
  if (!file.empty()) body["file"] = std::filesystem::absolute(file).lexically_normal().string();
  std::fprintf(stderr, "%s\n",
               Tr("image.building", lang, {{"name", name}, {"dir", body["dir"].get<std::string>()}})
                   .c_str());
  return StreamImage("/api/v1/images/build?stream=1", body, name, "image.build_progress",
                     "image.built", json, lang);
}

Status RunList(bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Get("/api/v1/images"));
  if (json) {
    PrintJson(r["images"]);
    return Status::OK();
  }
  if (r["images"].empty()) {
    std::printf("%s\n", Tr("image.none", lang).c_str());
    if (!r.value("available", true)) {
      std::printf("%s\n", Tr("image.unavailable", lang, {{"note", r.value("note", "")}}).c_str());
    }
    return Status::OK();
  }
  std::vector<std::vector<std::string>> rows = {
      {Tr("image.col_name", lang), Tr("image.col_id", lang), Tr("image.col_size", lang),
       Tr("image.col_created", lang), Tr("image.col_used", lang), Tr("image.col_runs", lang)}};
  for (const auto& v : r["images"]) {
    const int64_t used = v.value("last_used_at_ms", int64_t{0});
    rows.push_back({v.value("name", ""), ShortId(v.value("id", "")), Size(v),
                    AgeAgo(v.value("created_at_ms", int64_t{0}), lang),
                    used > 0 ? AgeAgo(used, lang) : "-", Runs(v)});
  }
  PrintTable(rows);
  const Json& store = r["store"];
  if (store.is_object() && store.value("bytes", uint64_t{0}) > 0) {
    const uint64_t cap = store.value("max_bytes", uint64_t{0});
    std::printf("%s\n", Tr(cap > 0 ? "image.store_capped" : "image.store", lang,
                           {{"bytes", FormatBytes(store.value("bytes", uint64_t{0}))},
                            {"max", FormatBytes(cap)}})
                            .c_str());
  }
  return Status::OK();
}

Status RunInspect(const std::string& name, bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Get("/api/v1/images/" + net::PercentEncode(name)));
  if (json) {
    PrintJson(r);
    return Status::OK();
  }
  const int64_t used = r.value("last_used_at_ms", int64_t{0});
  std::vector<std::vector<std::string>> rows = {
      {Tr("image.col_name", lang), r.value("name", "")},
      {Tr("image.col_id", lang), "sha256:" + r.value("id", "")},
      {Tr("image.col_digest", lang), r.value("digest", "").empty() ? "-" : r.value("digest", "")},
      {Tr("image.col_runs", lang), Runs(r)},
      {Tr("image.col_size", lang), Size(r)},
      {Tr("image.col_source", lang), r.value("source", "")},
      {Tr("image.col_created", lang), AgeAgo(r.value("created_at_ms", int64_t{0}), lang)},
      {Tr("image.col_used", lang), used > 0 ? AgeAgo(used, lang) : "-"}};
  PrintTable(rows);
  return Status::OK();
}

Status RunPrune(const std::string& unused_for, bool all_users, bool dry_run, bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Post("/api/v1/images/prune", Json{{"unused_for", unused_for},
                                                                {"all_users", all_users},
                                                                {"dry_run", dry_run}}));
  if (json) {
    PrintJson(r);
    return Status::OK();
  }
  for (const auto& p : r["removed"]) {
    std::printf("%s\n", Tr(dry_run ? "image.would_prune" : "image.pruned", lang,
                           {{"name", p.value("name", "")}, {"id", ShortId(p.value("id", ""))}})
                            .c_str());
  }
  std::printf("%s\n",
              Tr("image.prune_count", lang, {{"n", std::to_string(r["removed"].size())}}).c_str());
  if (r.contains("build_caches") && !r["build_caches"].empty()) {
    std::printf("%s\n", Tr(dry_run ? "image.would_prune_caches" : "image.pruned_caches", lang,
                           {{"n", std::to_string(r["build_caches"].size())}})
                            .c_str());
  }
  return Status::OK();
}

Status RunRemove(const std::string& name, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Delete("/api/v1/images/" + net::PercentEncode(name)));
  std::printf("%s\n", Tr("image.removed", lang, {{"name", r.value("name", name)}}).c_str());
  return Status::OK();
}

}  // namespace

void SetupImage(CLI::App& app, Globals& g, Status& status) {
  auto* image = app.add_subcommand("image");
  image->require_subcommand(1);

  static std::string import_name, import_file;
  static bool import_json = false;
  auto* import = image->add_subcommand("import");
  import->add_option("name", import_name)->required();
  import->add_option("file", import_file)->required();
  import->add_flag("--json", import_json);
  import->callback([&status, &g] {
    status = RunImport(import_name, import_file, import_json, g.Language());
});

static std::string pull_ref, pull_name, pull_secret;
static bool pull_insecure = false, pull_json = false;
auto* pull = image->add_subcommand("pull");
pull->add_option("ref", pull_ref)->required();
pull->add_option("--name", pull_name);
pull->add_option("--secret", pull_secret);
pull->add_flag("--insecure", pull_insecure);
pull->add_flag("--json", pull_json);
pull->callback([&status, &g] {
  status = RunPull(pull_ref, pull_name, pull_secret, pull_insecure, pull_json, g.Language());
});

static std::string build_name, build_dir, build_file;
static bool build_json = false;
auto* build = image->add_subcommand("build");
build->add_option("name", build_name)->required();
build->add_option("dir", build_dir)->required();
build->add_option("-f,--file", build_file);
build->add_flag("--json", build_json);
build->callback([&status, &g] {
  status = RunBuild(build_name, build_dir, build_file, build_json, g.Language());
});

static bool ls_json = false;
auto* ls = image->add_subcommand("ls");
ls->add_flag("--json", ls_json);
ls->callback([&status, &g] { status = RunList(ls_json, g.Language()); });

static std::string inspect_name;
static bool inspect_json = false;
auto* inspect = image->add_subcommand("inspect");
inspect->add_option("name", inspect_name)->required();
inspect->add_flag("--json", inspect_json);
inspect->callback([&status, &g] { status = RunInspect(inspect_name, inspect_json, g.Language()); });

static std::string prune_unused;
static bool prune_all = false, prune_dry = false, prune_json = false;
auto* prune = image->add_subcommand("prune");
prune->add_option("--unused-for", prune_unused)->required();
prune->add_flag("--all-users", prune_all);
prune->add_flag("--dry-run", prune_dry);
prune->add_flag("--json", prune_json);
prune->callback([&status, &g] {
  status = RunPrune(prune_unused, prune_all, prune_dry, prune_json, g.Language());
});

static std::string rm_name;
auto* rm = image->add_subcommand("rm");
rm->add_option("name", rm_name)->required();
rm->callback([&status, &g] { status = RunRemove(rm_name, g.Language()); });
}  // namespace lathe::cmd

}  // namespace lathe::cmd
