// lathe doctor | explain | term | plan

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/common/units.h"
#include "lathe/daemon/config.h"
#include "lathe/daemon/home.h"
#include "lathe/doctor/doctor.h"
#include "lathe/doctor/explain_format.h"
#include "lathe/doctor/explainer.h"
#include "lathe/doctor/glossary.h"
#include "lathe/doctor/gpu_catalog.h"
#include "lathe/doctor/plan.h"
#include "lathe/doctor/plan_format.h"
#include "lathe/doctor/real_system.h"
#include "lathe/doctor/report_format.h"
#include "lathe/doctor/term_format.h"
#include "lathe/gpu/source.h"
#include "lathe/net/http_client.h"
#include "lathe/os/clock.h"
#include "lathe/os/files.h"
#include "lathe/os/identity.h"
#include "lathe/os/process.h"
#include "lathe/os/terminal.h"

#include <fmt/format.h>

namespace lathe::cmd {
namespace {

// How long the doctor waits for a daemon to answer /api/v1/status.
constexpr int kDaemonProbeTimeoutMs = 2000;
// How long a test run that was stopped may take to end before the doctor
// leaves it (the daemon's kill grace is 10 s by default).
constexpr int64_t kTestRunStopWaitMs = 15000;

void Print(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }

// JSON that never throws on odd bytes from logs or the environment: the
// command's answer, also when a check failed (main() adds no error object).
void PrintJsonSafe(const Json& j) {
  Print(j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
  MarkJsonAnswered();
}

bool UseColor() { return os::StdoutIsTerminal() && std::getenv("NO_COLOR") == nullptr; }

void AddLang(CLI::App* sub, Globals& g) {
  sub->add_option("--lang", g.lang)->check(CLI::IsMember({"zh", "en", "zh-CN", "zh_CN", "pseudo"}));
}

// ---- doctor ------------------------------------------------------------------

struct DoctorFlags {
  bool json = false, fix_script = false, strict = false, fast = false;
  bool cluster = false;  // --cluster: also submit a test job to each Slurm pool
  std::string only;
  std::string image;  // --image: torch checked in this image of the user's
};

// The Slurm pools of the daemon's config.yaml, as the doctor takes them.
doctor::ClusterOptions ClusterPools(const daemon::HomePaths& home, bool run_job) {
  doctor::ClusterOptions c;
  c.config_file = home.home + "/config.yaml";
  c.run_job = run_job;
  auto config = daemon::LoadDaemonConfig(c.config_file);
  if (!config.ok()) {
    c.config_error = config.status().message();
    c.config_unreadable = config.status().code() == Code::kPermissionDenied;
    return c;
  }
  if (!config->pools) return c;
  for (const auto& [name, p] : *config->pools) {
    if (p.type != "slurm") continue;
    const exec::SlurmPoolOptions& s = p.slurm;
    c.pools.push_back({name, s.partition, s.account, s.qos, s.shared_dir, s.slurm_conf,
                       s.lathe_path.empty() ? os::SelfExe() : s.lathe_path, s.bin_dir});
  }
  return c;
}

// Is a daemon answering? Short timeouts, unlike ApiClient's: the doctor must
// not hang on a stuck daemon.
Status PingDaemon(std::string* where) {
  Status last = Status::Unavailable("no socket found");
  for (const auto& c : daemon::ClientCandidates()) {
    *where = c.paths.socket;
    if (!os::Exists(c.paths.socket)) {
      last = Status::Unavailable("no socket at " + c.paths.socket);
      continue;
    }
    net::ClientOptions o;
    o.unix_socket = c.paths.socket;
    o.connect_timeout_ms = kDaemonProbeTimeoutMs;
    o.timeout_ms = kDaemonProbeTimeoutMs;
    net::HttpClient http(o);
    auto r = http.Request("GET", "/api/v1/status");
    if (r.ok() && r->status < 400) return Status::OK();
    last = r.ok() ? Status::Unavailable("HTTP " + std::to_string(r->status)) : r.status();
  }
  return last;
}

// Waits for the checkpoint event of test run `id`: the snapshot that holds
// its file and how long after the run's start it was committed.
Result<doctor::CaptureResult> WaitForCapture(api::ApiClient& c, const std::string& id,
                                             int64_t deadline, int64_t timeout_ms) {
  while (os::RealClock().MonotonicMs() < deadline) {
    ASSIGN_OR_RETURN(Json r, c.Get("/api/v1/runs/" + id));
    int64_t started = 0;
    for (const auto& e : r.value("events", Json::array())) {
      std::string type = e.value("type", "");
      if (type == "state" && e.value("message", "").rfind("started", 0) == 0)
        started = e.value("ts_ms", int64_t{0});
      if (type == "warning") return Status::FailedPrecondition(e.value("message", ""));
      if (type == "checkpoint" && e.contains("data") && e["data"].contains("snapshot")) {
        doctor::CaptureResult res;
        res.snapshot = e["data"]["snapshot"].get<std::string>();
        res.ms = started ? e.value("ts_ms", int64_t{0}) - started : 0;
        return res;
      }
    }
    std::string state = r.value("state", "");
    if (state == "failed" || state == "stopped" || state == "lost") {
      return Status::FailedPrecondition("test run " + id + " " + state + ": " +
                                        r.value("reason", ""));
    }
    os::RealClock().SleepMs(50);
  }
  return Status::DeadlineExceeded(
      fmt::format("no snapshot of test run {} within {} s", id, timeout_ms / 1000));
}

bool Finished(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "stopped" || state == "lost";
}

// Removes the doctor's test run and its snapshots, so that neither stays in
// `lathe ps` or is what `lathe snap restore latest` picks. The daemon takes
// them once the run has finished (its capture at the end included); a run
// still going at `deadline_ms` (monotonic) is stopped first.
Status RemoveTestRun(api::ApiClient& c, const std::string& id, int64_t deadline_ms) {
  bool stopped = false;
  const int64_t give_up_ms = deadline_ms + kTestRunStopWaitMs;
  while (true) {
    ASSIGN_OR_RETURN(Json r, c.Get("/api/v1/runs/" + id));
    if (Finished(r.value("state", ""))) break;
    int64_t now = os::RealClock().MonotonicMs();
    if (now >= give_up_ms) return Status::DeadlineExceeded("test run " + id + " did not end");
    if (now >= deadline_ms && !stopped) {
      stopped = true;
      (void)c.Post("/api/v1/runs/" + id + "/stop", Json::object());  // it may just have ended
    }
    os::RealClock().SleepMs(50);
  }
  return c.Delete("/api/v1/runs/" + id + "?snapshots=1").status();
}

// A test run's fresh working directory, /tmp/lathe-doctor-XXXXXX, removed
// when it goes (best effort: what stays is removed again at the next start or
// sweep).
struct ScratchDir {
  std::string path;
  Status Make() {
    char tmpl[] = "/tmp/lathe-doctor-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return ErrnoStatus("mkdtemp", errno);
    path = tmpl;
    return Status::OK();
  }
  ~ScratchDir() {
    if (!path.empty()) (void)os::RemoveAll(path);
  }
};

// The seed's check-upload.sh, done properly: a run writes one file into a
// fresh checkpoint directory, and the daemon must capture it. Whatever the
// outcome, the run and its snapshot are removed again.
Result<doctor::CaptureResult> CaptureRoundTrip(int64_t timeout_ms) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::ConnectLocal());  // this machine's daemon
  ScratchDir scratch;
  RETURN_IF_ERROR(scratch.Make());
  const std::string& dir = scratch.path;
  Json spec = {
      {"command", {"/bin/sh", "-c", "printf lathe-doctor > \"$LATHE_CHECKPOINT_DIR/probe.bin\""}},
      {"workdir", dir},
      {"checkpoints", {{"dir", dir + "/ckpt"}, {"keep", 1}}}};
  ASSIGN_OR_RETURN(Json run, c->Post("/api/v1/runs", spec));
  std::string id = run.value("id", "");
  int64_t deadline = os::RealClock().MonotonicMs() + timeout_ms;
  Result<doctor::CaptureResult> result = WaitForCapture(*c, id, deadline, timeout_ms);
  Status removed = RemoveTestRun(*c, id, deadline);
  if (result.ok() && !removed.ok()) {
    result->left_run = id;
    result->cleanup_error = removed.message();
  }
  return result;
}

// `lathe doctor --image`: `argv` as a run of the user's in `image`, in a
// fresh scratch directory; its log and exit status once it ended, then the
// run is removed. A run still queued or going at the deadline is stopped.
Result<os::CommandOutput> RunInImage(const std::string& image, const std::vector<std::string>& argv,
                                     int gpus, int64_t timeout_ms) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::ConnectLocal());
  ScratchDir scratch;
  RETURN_IF_ERROR(scratch.Make());
  Json spec = {{"command", argv}, {"image", image}, {"workdir", scratch.path}, {"gpus", gpus}};
  ASSIGN_OR_RETURN(Json run, c->Post("/api/v1/runs", spec));
  const std::string id = run.value("id", "");
  const int64_t deadline = os::RealClock().MonotonicMs() + timeout_ms;
  Json r;
  while (true) {
    ASSIGN_OR_RETURN(r, c->Get("/api/v1/runs/" + id));
    if (Finished(r.value("state", "")) || os::RealClock().MonotonicMs() >= deadline) break;
    os::RealClock().SleepMs(100);
  }
  const bool ended = Finished(r.value("state", ""));
  auto log = c->GetText("/api/v1/runs/" + id + "/logs");
  (void)RemoveTestRun(*c, id, deadline);  // best effort: a leftover shows in `lathe ps`
  if (!ended) {
    return Status::DeadlineExceeded(
        fmt::format("the test run in image {} did not end within {} s ({})", image,
                    timeout_ms / 1000, r.value("state", "")));
  }
  if (r.value("state", "") != "succeeded" && r.value("state", "") != "failed") {
    return Status::FailedPrecondition(fmt::format("the test run in image {} {}: {}", image,
                                                  r.value("state", ""), r.value("reason", "")));
  }
  os::CommandOutput out;
  const Json& code = r["exit_code"];
  out.exit_code =
      code.is_number_integer() ? code.get<int>() : (r.value("state", "") == "succeeded" ? 0 : 1);
  if (log.ok()) out.out = *log;
  return out;
}

Status RunDoctorCmd(const DoctorFlags& f, Lang lang) {
  doctor::RealSystemOptions ro;
  const daemon::HomePaths home = daemon::DaemonHome("");
  ro.lathe_home = home.home;
  ro.lathe_home_is_others = home.system && !os::IsRoot();
  ro.daemon_status = PingDaemon;
  ro.store_dir = daemon::ReadableStoreDir();
  if (ro.store_dir.empty()) ro.unreadable_store_dir = daemon::UnreadableStoreDir();
  ro.self_exe = os::SelfExe();
  ro.capture = CaptureRoundTrip;
  ro.run_in_image = RunInImage;
  auto view = doctor::NewRealSystemView(std::move(ro));
  doctor::DoctorOptions o;
  o.fast = f.fast;
  o.only = f.only;
  if (!f.image.empty()) {
    o.probes.image = f.image;
    if (o.only.empty()) o.only = "gpu";  // the checks an image changes
  }
  o.probes.cluster_options = ClusterPools(home, f.cluster);
  ASSIGN_OR_RETURN(doctor::Report report, doctor::RunDoctor(*view, o));
  if (f.fix_script) {
    // stdout is only the script; the exit code is the checks', as without it.
    Print(doctor::FormatFixScript(report, lang));
  } else if (f.json) {
    PrintJsonSafe(doctor::ReportToJson(report, lang, f.strict));
  } else {
    Print(doctor::FormatReportTable(report, {lang, UseColor(), true}));
  }
  if (doctor::DoctorExitCode(report, f.strict) == 0) return Status::OK();
  return Status::Msg(
      Code::kFailedPrecondition, f.strict ? "doctor.failed_strict" : "doctor.failed",
      {{"fail", std::to_string(report.fail)}, {"warn", std::to_string(report.warn)}});
}

// ---- explain -----------------------------------------------------------------

struct ExplainFlags {
  std::vector<std::string> text;
  std::string log, run;
  bool json = false;
  size_t max = 3;
};

Result<std::string> ReadStdin() {
  std::ostringstream ss;
  ss << std::cin.rdbuf();
  return ss.str();
}

Result<std::string> RunLog(const std::string& ref) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Get("/api/v1/runs/" + ref));
  return c->GetText("/api/v1/runs/" + r.value("id", ref) + "/logs");
}

// A lone word that could be a run id or name ("r-3f2a", "train-bert").
bool LooksLikeRunRef(const std::vector<std::string>& text) {
  if (text.size() != 1 || text[0].empty() || text[0].size() > 64) return false;
  for (char c : text[0]) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  }
  return true;
}

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// The text to explain: --log FILE ("-" = stdin), --run RUN, the arguments
// (a lone run id or name is fetched from the daemon when one answers), or
// piped stdin.
Result<std::string> ExplainInput(const ExplainFlags& f) {
  if (!f.log.empty()) return f.log == "-" ? ReadStdin() : os::ReadFile(f.log);
  if (!f.run.empty()) return RunLog(f.run);
  if (LooksLikeRunRef(f.text)) {
    auto log = RunLog(f.text[0]);
    if (log.ok()) return log;
  }
  if (!f.text.empty()) return Joined(f.text);
  if (!os::StdinIsTerminal()) return ReadStdin();
  return Status::Msg(Code::kInvalidArgument, "explain.no_input");
}

Status RunExplain(const ExplainFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(std::string text, ExplainInput(f));
  auto matches = doctor::Explainer::Default().Explain(text, f.max);
  if (f.json) {
    PrintJsonSafe(doctor::MatchesToJson(matches, lang));
  } else if (!matches.empty()) {
    Print(doctor::FormatMatches(matches, lang, UseColor()));
  }
  if (matches.empty()) return Status::Msg(Code::kFailedPrecondition, "explain.no_match");
  return Status::OK();
}

// ---- term --------------------------------------------------------------------

struct TermFlags {
  std::vector<std::string> words;
  bool json = false;
};

Status RunTerm(const TermFlags& f, Lang lang) {
  std::string query = Joined(f.words);
  const auto& glossary = doctor::Glossary::Default();
  ASSIGN_OR_RETURN(doctor::TermResults r,
                   doctor::SearchTerms(glossary, doctor::KnowledgeBase::Default(), query));
  if (f.json) {
    PrintJsonSafe(doctor::TermResultsToJson(r, query, lang));
  } else {
    Print(doctor::FormatTermResults(r, glossary, lang, UseColor()));
  }
  if (r.terms.empty() && r.kb.empty()) {
    return Status::Msg(Code::kNotFound, "term.not_found", {{"query", query}});
  }
  return Status::OK();
}

// ---- plan --------------------------------------------------------------------

struct PlanFlags {
  std::string params, precision = "bf16", optimizer = "adamw", checkpointing = "off", prices;
  int layers = 0, hidden = 0, heads = 0, vocab = 0, batch = 1, seq_len = 2048, grad_accum = 1;
  int zero = 0, gpus = 1;
  double mfu = 0.4;
  bool json = false;
};

Result<doctor::PlanInput> PlanInputFrom(const PlanFlags& f) {
  doctor::PlanInput in;
  if (!f.params.empty()) {
    ASSIGN_OR_RETURN(in.params, ParseCount(f.params));
  }
  in.layers = f.layers;
  in.hidden = f.hidden;
  in.heads = f.heads;
  in.vocab = f.vocab;
  ASSIGN_OR_RETURN(in.precision, doctor::ParsePrecision(f.precision));
  ASSIGN_OR_RETURN(in.optimizer, doctor::ParseOptimizer(f.optimizer));
  in.batch = f.batch;
  in.seq_len = f.seq_len;
  in.grad_accum = f.grad_accum;
  in.checkpointing = f.checkpointing == "on";
  in.zero = f.zero;
  in.gpus = f.gpus;
  return in;
}

// This machine's GPUs; none (not an error) without a driver.
gpu::Inventory LocalGpus() {
  auto source = gpu::OpenGpuSource("auto");
  if (!source.ok()) return {};
  auto inv = (*source)->Sample();
  return inv.ok() ? *inv : gpu::Inventory{};
}

Status RunPlan(const PlanFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(doctor::PlanInput in, PlanInputFrom(f));
  ASSIGN_OR_RETURN(doctor::MemoryPlan plan, doctor::PlanMemory(in));
  std::vector<std::string> catalog_paths =
      doctor::GpuCatalogOverridePaths([](const char* n) -> const char* { return std::getenv(n); });
  doctor::CatalogSource source;
  ASSIGN_OR_RETURN(std::vector<doctor::GpuModel> catalog,
                   doctor::LoadGpuCatalog(catalog_paths, &source.catalog_files));
  // The file to edit: the last one read (the user's wins), else the user's.
  source.edit_file =
      source.catalog_files.empty() ? catalog_paths.back() : source.catalog_files.back();
  if (!f.prices.empty()) {
    ASSIGN_OR_RETURN(std::string text, os::ReadFile(f.prices));
    RETURN_IF_ERROR(doctor::ApplyPrices(catalog, text, f.prices));
  }
  gpu::Inventory local = LocalGpus();
  auto fits = doctor::FitGpus(plan, in, catalog, &local, f.mfu);
  if (f.json) {
    PrintJsonSafe(doctor::PlanToJson(plan, fits, f.mfu));
  } else {
    Print(doctor::FormatPlan(in, plan, fits, f.mfu, source, lang));
  }
  return Status::OK();
}

}  // namespace

void SetupDoctor(CLI::App& app, Globals& g, Status& status) {
  static DoctorFlags df;
  auto* doc = app.add_subcommand("doctor");
  doc->add_flag("--json", df.json);
  doc->add_option("--only", df.only);
  doc->add_flag("--fix-script", df.fix_script);
  doc->add_flag("--strict", df.strict);
  doc->add_flag("--fast", df.fast);
  doc->add_flag("--cluster", df.cluster);
  doc->add_option("--image", df.image);
  AddLang(doc, g);
  doc->callback([&status, &g] { status = RunDoctorCmd(df, g.Language()); });

  static ExplainFlags ef;
  auto* ex = app.add_subcommand("explain");
  ex->add_option("text", ef.text);
  ex->add_option("--log", ef.log);
  ex->add_option("--run", ef.run);
  ex->add_option("--max", ef.max)->check(CLI::Range(1, 50));
  ex->add_flag("--json", ef.json);
  AddLang(ex, g);
  ex->callback([&status, &g] { status = RunExplain(ef, g.Language()); });

  static TermFlags tf;
  auto* term = app.add_subcommand("term");
  term->add_option("word", tf.words)->required();
  term->add_flag("--json", tf.json);
  AddLang(term, g);
  term->callback([&status, &g] { status = RunTerm(tf, g.Language()); });

  static PlanFlags pf;
  auto* plan = app.add_subcommand("plan");
  plan->add_option("--params", pf.params);
  plan->add_option("--layers", pf.layers);
  plan->add_option("--hidden", pf.hidden);
  plan->add_option("--heads", pf.heads);
  plan->add_option("--vocab", pf.vocab);
  plan->add_option("--precision", pf.precision)
      ->check(CLI::IsMember({"fp32", "bf16", "fp16", "int8"}));
  plan->add_option("--optimizer", pf.optimizer)
      ->check(CLI::IsMember({"adamw", "adam", "sgd", "adafactor"}));
  plan->add_option("--batch", pf.batch);
  plan->add_option("--seq-len", pf.seq_len);
  plan->add_option("--grad-accum", pf.grad_accum);
  plan->add_option("--checkpointing", pf.checkpointing)->check(CLI::IsMember({"on", "off"}));
  plan->add_option("--zero", pf.zero)->check(CLI::Range(0, 3));
  plan->add_option("--gpus", pf.gpus)->check(CLI::Range(1, 100000));
  plan->add_option("--mfu", pf.mfu)->check(CLI::Range(0.01, 1.0));
  plan->add_option("--prices", pf.prices);
  plan->add_flag("--json", pf.json);
  AddLang(plan, g);
  plan->callback([&status, &g] { status = RunPlan(pf, g.Language()); });
}

}  // namespace lathe::cmd
