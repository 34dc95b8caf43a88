#include "lathe/serve/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lathe/common/json.h"
#include "lathe/gpu/source.h"
#include "lathe/net/router.h"
#include "lathe/net/status_http.h"
#include "lathe/os/clock.h"
#include "lathe/serve/metrics.h"
#include "lathe/serve/model.h"
#include "lathe/serve/protocol.h"
#include "lathe/serve/repository.h"

namespace lathe::serve {
namespace {

constexpr int kReasonMaxChars = 2000;

RequestOutcome Outcome(const Status& s) {
  if (s.ok()) return RequestOutcome::kSuccess;
  if (s.msg_id() == "serve.queue_timeout") return RequestOutcome::kTimeout;
  switch (s.code()) {
    case Code::kInvalidArgument:
    case Code::kNotFound:
      return RequestOutcome::kInvalid;
    case Code::kResourceExhausted:
      return RequestOutcome::kRejected;
    case Code::kUnavailable:
    case Code::kCancelled:
    case Code::kDeadlineExceeded:
      return RequestOutcome::kUnavailable;
    default:
      return RequestOutcome::kError;
  }
}

net::HttpResponse JsonResponse(int status, std::string body) {
  net::HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.body += '\n';
  return r;
}

// The one error body of Lathe (common/json.h), whose "error" is the string
// KServe v2 asks for.
net::HttpResponse ErrorResponse(const Status& s) {
  return JsonResponse(net::HttpStatusFor(s),
                      StatusToJson(s).dump(-1, ' ', false, Json::error_handler_t::replace));
}

int VisibleGpus(gpu::GpuSource* source) {
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v != nullptr) {
    std::string s = v;
    if (s.empty() || s == "-1" || s == "none" || s == "NoDevFiles") return 0;
    return static_cast<int>(std::count(s.begin(), s.end(), ',')) + 1;
  }
  if (source == nullptr) return 0;
  auto inv = source->Sample();
  return inv.ok() ? static_cast<int>(inv->gpus.size()) : 0;
}

Json TensorMetadata(const TensorSpec& t, bool batching) {
  Shape shape;
  if (batching) shape.push_back(-1);
  if (t.dims) {
    shape.insert(shape.end(), t.dims->begin(), t.dims->end());
  } else {
    shape.push_back(-1);
  }
  return {{"name", t.name},
          {"datatype",
           t.datatype == DataType::kInvalid ? "ANY" : std::string(DataTypeName(t.datatype))},
          {"shape", shape}};
}

// Watch mode's key for a version: its model file, or its directory when the
// backend has no file (identity).
std::string VersionKey(const VersionSource& v) {
  return v.model_file.empty() ? v.dir : v.model_file;
}

// The responder of one request, shared by the scheduler's callback.
struct Reply {
  std::unique_ptr<net::Responder> responder;
  int64_t start_us = 0;
};

// One request matched to a route. A route answers through `rsp` (and resets
// it) or hands it on; `params` are views into `req.path`.
struct Call {
  net::HttpRequest& req;
  std::unique_ptr<net::Responder>& rsp;
  const net::PathParams& params;

  std::string Param(std::string_view name) const { return std::string(params.Get(name)); }
  void Send(net::HttpResponse r) {
    rsp->Send(std::move(r));
    rsp.reset();
  }
};

enum class ServerState { kLoading, kServing, kDraining, kStopped };

struct ServedModel {
  ModelSource source;
  // Shared: a request holds its version while it is being admitted, so an
  // unload (explicit model control) can proceed without waiting on lookups.
  std::vector<std::shared_ptr<ModelVersion>> versions;  // ascending
};

class ServerImpl final : public ServeServer {
 public:
  explicit ServerImpl(ServeOptions o) : options_(std::move(o)) {
    if (!options_.now_us) options_.now_us = os::RealMonotonicUs;
  }
  ~ServerImpl() override { Stop(); }

  Status Init();
  Status Start() override;
  int port() const override { return port_; }
  void Stop() override;
  std::vector<std::string> Describe() const override;

 private:
  void DeclareMetrics();
  Result<std::vector<std::shared_ptr<ModelVersion>>> LoadVersions(const ModelSource& src);
  Status AddModel(ModelSource src);
  Result<std::shared_ptr<ModelVersion>> Find(const std::string& name,
                                             const std::string& version) const;
  bool AllReady() const;

  // The route table, as docs/serving.md lists the endpoints.
  Status AddRoutes();
  void Handle(net::HttpRequest req, std::unique_ptr<net::Responder> responder);
  // Routes.
  void Live(Call& c);
  void Ready(Call& c);
  void MetricsText(Call& c);
  void ServerMetadata(Call& c);
  void Predict(Call& c);    // /predict[?model=M]
  void PredictV1(Call& c);  // /v1/models/{model}[/versions/{version}]:predict
  void ModelMetadata(Call& c);
  void ModelReady(Call& c);
  void ModelConfigRoute(Call& c);
  void Infer(Call& c);
  void RepositoryIndex(Call& c);
  void RepositoryLoad(Call& c) { RepositoryControl(c, true); }
  void RepositoryUnload(Call& c) { RepositoryControl(c, false); }
  void RepositoryControl(Call& c, bool load);

  void HandleInfer(net::HttpRequest& req, std::unique_ptr<net::Responder>& rsp,
                   const std::string& model, const std::string& version);
  void HandlePredict(net::HttpRequest& req, std::unique_ptr<net::Responder>& rsp,
                     const std::string& model, const std::string& version);
  Status SchedulingFrom(const net::HttpRequest& req,
                        const std::optional<std::string>& param_priority, int64_t param_timeout_us,
                        const ModelConfig& c, ModelRequest& mr) const;
  // Submits and answers through `finish` (called once, on any thread).
  void Submit(std::shared_ptr<ModelVersion> mv, const std::string& version, ModelRequest mr,
              std::unique_ptr<net::Responder>& rsp,
              std::function<net::HttpResponse(const ModelVersion&, InferResult&)> finish);
  void Count(const ModelVersion& mv, const Status& s, int64_t start_us);
  std::string RenderMetrics();
  void ProbeLoop();
  void ControlLoop();
  void Post(std::function<void()> task);
  // Watch mode (control thread only): loads new complete versions beside the
  // old, swaps, drains the old; loads new models, unloads removed ones.
  void Rescan();
  void RescanModel(const std::string& name);
  void Unload(const std::string& name);

  ServeOptions options_;
  std::unique_ptr<BackendRegistry> registry_;
  std::unique_ptr<gpu::GpuSource> gpus_;
  int visible_gpus_ = 0;
  Metrics metrics_;
  using Route = void (ServerImpl::*)(Call&);
  net::Router<Route> router_;  // constant after Init
  std::unique_ptr<net::HttpServer> http_;
  int port_ = 0;
  std::atomic<ServerState> state_{ServerState::kLoading};

  mutable std::mutex mu_;
  std::map<std::string, ServedModel> models_;       // guarded by mu_
  std::map<std::string, std::string> load_errors_;  // guarded by mu_: last failed load per model

  // Watch mode, used only by the control thread: each version file's state at
  // the last scan, and the state at which a version failed to load (it is
  // retried only once the file changes).
  std::map<std::string, FileState> seen_, failed_;

  std::mutex threads_mu_;
  std::condition_variable threads_cv_;
  bool threads_stop_ = false;                  // guarded by threads_mu_
  std::deque<std::function<void()>> control_;  // guarded by threads_mu_
  std::thread prober_, controller_;
};

void ServerImpl::DeclareMetrics() {
  using T = Metrics::Type;
  metrics_.Declare(
      "lathe_serve_requests_total", T::kCounter,
      "Inference requests by model, version and outcome (success, invalid, rejected, timeout, "
      "unavailable, error).");
  metrics_.Declare("lathe_serve_request_duration_seconds", T::kHistogram,
                   "Time from receiving an inference request to its answer.",
                   Metrics::LatencyBuckets());
  metrics_.Declare("lathe_serve_queue_duration_seconds", T::kHistogram,
                   "Time admitted requests waited in the queue before an instance took them.",
                   Metrics::LatencyBuckets());
  metrics_.Declare("lathe_serve_compute_duration_seconds", T::kHistogram,
                   "Time the backend took to execute one batch.", Metrics::LatencyBuckets());
  metrics_.Declare("lathe_serve_batch_size", T::kHistogram, "Rows in each executed batch.",
                   Metrics::BatchBuckets());
  metrics_.Declare("lathe_serve_queue_length", T::kGauge,
                   "Requests waiting, per priority level (1 is highest).");
  metrics_.Declare("lathe_serve_inflight_requests", T::kGauge,
                   "Requests admitted and not yet answered, per priority level.");
  metrics_.Declare("lathe_serve_model_ready", T::kGauge,
                   "1 when the model version is ready (loaded, last probe passed).");
  metrics_.Declare("lathe_serve_model_loads_total", T::kCounter,
                   "Model version loads by outcome (success, failure).");
  metrics_.Declare("lathe_gpu_utilization_ratio", T::kGauge,
                   "GPU utilization over the driver's last sample (0-1).");
  metrics_.Declare("lathe_gpu_memory_used_bytes", T::kGauge, "GPU memory in use.");
  metrics_.Declare("lathe_gpu_memory_total_bytes", T::kGauge, "GPU memory in total.");
}

Status ServerImpl::Init() {
  if (options_.repository.empty() && options_.models.empty()) {
    return Status::Msg(Code::kInvalidArgument, "serve.no_models");
  }
  const std::string& mc = options_.model_control;
  if (mc != "none" && mc != "explicit" && mc != "watch") {
    return Status::Msg(Code::kInvalidArgument, "serve.bad_model_control", {{"value", mc}});
  }
  if (mc == "watch" && options_.repository.empty()) {
    return Status::Msg(Code::kInvalidArgument, "serve.watch_needs_repository");
  }
  DeclareMetrics();
  RETURN_IF_ERROR(AddRoutes());
  registry_ = std::make_unique<BackendRegistry>(
      options_.backend_dirs.empty() ? BackendRegistry::DefaultSearchDirs() : options_.backend_dirs);
  auto src = gpu::OpenGpuSource(options_.gpus);
  if (!src.ok()) return src.status();
  gpus_ = std::move(*src);
  visible_gpus_ = VisibleGpus(gpus_.get());
  std::vector<ModelSource> sources;
  if (!options_.repository.empty()) {
    ASSIGN_OR_RETURN(sources, ScanRepository(options_.repository));
  }
  for (const auto& flag : options_.models) {
    ASSIGN_OR_RETURN(ModelSource m, ModelFromFlag(flag));
    sources.push_back(std::move(m));
  }
  if (sources.empty()) return Status::Msg(Code::kInvalidArgument, "serve.no_models");
  for (auto& s : sources) {
    // Watch mode compares later scans with what is on disk now.
    for (const auto& v : s.available) seen_[VersionKey(v)] = StatFile(v.model_file);
    RETURN_IF_ERROR(AddModel(std::move(s)));
  }
  return Status::OK();
}

Result<std::vector<std::shared_ptr<ModelVersion>>> ServerImpl::LoadVersions(
    const ModelSource& src) {
  std::vector<int64_t> available;
  for (const auto& v : src.available) available.push_back(v.version);
  std::vector<int64_t> chosen = SelectVersions(src.config.version_policy, available);
  if (chosen.empty()) {
    return Status::Msg(Code::kNotFound, "serve.no_versions",
                       {{"model", src.name}, {"dir", src.model_dir}});
  }
  std::vector<std::shared_ptr<ModelVersion>> out;
  for (int64_t v : chosen) {
    const VersionSource& vs = *std::find_if(src.available.begin(), src.available.end(),
                                            [&](const VersionSource& x) { return x.version == v; });
    ModelOptions mo{registry_.get(), &metrics_, options_.now_us, visible_gpus_};
    spdlog::info("serve: loading {} version {} ({} backend)", src.name, v, src.config.backend);
    ASSIGN_OR_RETURN(auto mv, ModelVersion::Load(src, vs, mo));
    out.push_back(std::shared_ptr<ModelVersion>(std::move(mv)));
  }
  return out;
}

Status ServerImpl::AddModel(ModelSource src) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (models_.count(src.name) != 0) {
      return Status::Msg(Code::kInvalidArgument, "serve.duplicate_model", {{"model", src.name}});
    }
  }
  ASSIGN_OR_RETURN(auto versions, LoadVersions(src));
  std::lock_guard<std::mutex> l(mu_);
  std::string name = src.name;
  models_[name] = ServedModel{std::move(src), std::move(versions)};
  return Status::OK();
}

Result<std::shared_ptr<ModelVersion>> ServerImpl::Find(const std::string& name,
                                                       const std::string& version) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = models_.find(name);
  if (it == models_.end() || it->second.versions.empty()) {
    return Status::Msg(Code::kNotFound, "serve.unknown_model", {{"model", name}});
  }
  const auto& vs = it->second.versions;
  if (version.empty()) {
    // The newest version that is ready, else the newest.
    for (auto v = vs.rbegin(); v != vs.rend(); ++v) {
      if ((*v)->ready()) return *v;
    }
    return vs.back();
  }
  for (const auto& v : vs) {
    if (std::to_string(v->version()) == version) return v;
  }
  return Status::Msg(Code::kNotFound, "serve.unknown_version",
                     {{"model", name}, {"version", version}});
}

bool ServerImpl::AllReady() const {
  if (state_.load() != ServerState::kServing) return false;
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [name, m] : models_) {
    for (const auto& v : m.versions) {
      if (!v->ready()) return false;
    }
  }
  return true;
}

std::vector<std::string> ServerImpl::Describe() const {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [name, m] : models_) {
    for (const auto& v : m.versions) {
      out.push_back(fmt::format("{} v{} ({}, {})", name, v->version(), m.source.config.backend,
                                ModelStateName(v->state())));
    }
  }
  return out;
}

Status ServerImpl::Start() {
  ASSIGN_OR_RETURN(
      http_, net::HttpServer::Create(
                 options_.http, [this](net::HttpRequest r, std::unique_ptr<net::Responder> rsp) {
                   Handle(std::move(r), std::move(rsp));
                 }));
  if (options_.port >= 0) {
    ASSIGN_OR_RETURN(port_, http_->ListenTcp(options_.host, options_.port));
  }
  if (!options_.socket.empty()) {
    RETURN_IF_ERROR(http_->ListenUnix(options_.socket, options_.socket_mode));
  }
  RETURN_IF_ERROR(http_->Start());
  state_ = ServerState::kServing;
  prober_ = std::thread([this] { ProbeLoop(); });
  controller_ = std::thread([this] { ControlLoop(); });
  return Status::OK();
}

void ServerImpl::Stop() {
  ServerState s = state_.load();
  if (s == ServerState::kStopped || s == ServerState::kDraining) return;
  const bool served = s == ServerState::kServing;
  state_ = ServerState::kDraining;
  if (served) spdlog::info("serve: draining");
  // 1. Stop accepting; admitted requests still finish (the models run).
  if (http_) http_->Stop(options_.drain_ms);
  // 2. Background threads.
  {
    std::lock_guard<std::mutex> l(threads_mu_);
    threads_stop_ = true;
  }
  threads_cv_.notify_all();
  if (prober_.joinable()) prober_.join();
  if (controller_.joinable()) controller_.join();
  // 3. Unload every model (queues are empty by now; anything left still runs).
  std::map<std::string, ServedModel> models;
  {
    std::lock_guard<std::mutex> l(mu_);
    models.swap(models_);
  }
  for (auto& [name, m] : models) {
    for (auto& v : m.versions) v->Stop(true);
  }
  state_ = ServerState::kStopped;
  if (served) spdlog::info("serve: stopped");
}

void ServerImpl::ProbeLoop() {
  std::unique_lock<std::mutex> lock(threads_mu_);
  while (!threads_stop_) {
    threads_cv_.wait_for(lock, std::chrono::milliseconds(options_.probe_tick_ms));
    if (threads_stop_) break;
    lock.unlock();
    std::vector<std::shared_ptr<ModelVersion>> all;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (auto& [n, m] : models_) all.insert(all.end(), m.versions.begin(), m.versions.end());
    }
    for (auto& v : all) v->ProbeTick();
    lock.lock();
  }
}

void ServerImpl::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> l(threads_mu_);
    control_.push_back(std::move(task));
  }
  threads_cv_.notify_all();
}

void ServerImpl::ControlLoop() {
  const bool watch = options_.model_control == "watch";
  const auto interval = std::chrono::milliseconds(std::max(10, options_.watch_interval_ms));
  auto next_scan = std::chrono::steady_clock::now() + interval;
  std::unique_lock<std::mutex> lock(threads_mu_);
  for (;;) {
    auto ready = [&] { return threads_stop_ || !control_.empty(); };
    if (watch) {
      threads_cv_.wait_until(lock, next_scan, ready);
    } else {
      threads_cv_.wait(lock, ready);
    }
    if (threads_stop_ && control_.empty()) break;
    if (!control_.empty()) {
      auto task = std::move(control_.front());
      control_.pop_front();
      lock.unlock();
      task();
      lock.lock();
      continue;
    }
    if (watch && std::chrono::steady_clock::now() >= next_scan) {
      lock.unlock();
      Rescan();
      lock.lock();
      next_scan = std::chrono::steady_clock::now() + interval;
    }
  }
}

void ServerImpl::Unload(const std::string& name) {
  std::vector<std::shared_ptr<ModelVersion>> old;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = models_.find(name);
    if (it == models_.end()) return;
    old = std::move(it->second.versions);
    models_.erase(it);
  }
  spdlog::info("serve: {}: its directory is gone; unloading", name);
  for (auto& v : old) v->Stop(true);
}

void ServerImpl::Rescan() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(options_.repository, ec)) {
    std::string n = e.path().filename().string();
    if (e.is_directory(ec) && n[0] != '.' &&
        std::filesystem::is_regular_file(e.path() / "config.yaml", ec)) {
      names.push_back(n);
    }
  }
  if (ec) {
    spdlog::warn("serve: cannot scan {}: {}", options_.repository, ec.message());
    return;  // keep serving what is loaded
  }
  for (const auto& n : names) RescanModel(n);
  std::vector<std::string> gone;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [n, m] : models_) {
      if (std::find(names.begin(), names.end(), n) == names.end()) gone.push_back(n);
    }
  }
  for (const auto& n : gone) Unload(n);  // left out means unload
}

void ServerImpl::RescanModel(const std::string& name) {
  auto src = LoadModelDir(options_.repository + "/" + name, name);
  if (!src.ok()) {
    std::lock_guard<std::mutex> l(mu_);
    if (load_errors_[name] != src.status().message())
      spdlog::warn("serve: {}", src.status().message());
    load_errors_[name] = src.status().message();
    return;
  }
  // 1. Complete versions, except those that failed to load as they are now.
  std::vector<int64_t> complete;
  for (const auto& v : src->available) {
    FileState now;
    auto prev = seen_.find(VersionKey(v));
    bool whole = VersionComplete(
        v, prev == seen_.end() ? std::nullopt : std::optional<FileState>(prev->second), now);
    seen_[VersionKey(v)] = now;
    auto failed = failed_.find(VersionKey(v));
    if (failed != failed_.end() && failed->second == now) continue;
    if (whole) complete.push_back(v.version);
  }
  std::vector<int64_t> wanted = SelectVersions(src->config.version_policy, complete);
  if (wanted.empty()) return;  // nothing complete yet: keep what serves
  // 2. What serves now.
  std::vector<std::shared_ptr<ModelVersion>> current;
  bool same_config = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (auto it = models_.find(name); it != models_.end()) {
      current = it->second.versions;
      same_config = ModelConfigToJson(it->second.source.config) == ModelConfigToJson(src->config);
    }
  }
  std::vector<int64_t> have;
  for (const auto& v : current) have.push_back(v->version());
  if (wanted == have && same_config) return;
  // 3. Load what is new (everything when config.yaml changed) beside the old;
  //    any failure keeps the old versions serving.
  std::vector<std::shared_ptr<ModelVersion>> next;
  for (int64_t v : wanted) {
    auto reuse = std::find_if(current.begin(), current.end(),
                              [&](const auto& m) { return m->version() == v; });
    if (same_config && reuse != current.end()) {
      next.push_back(*reuse);
      continue;
    }
    const VersionSource& vs = *std::find_if(src->available.begin(), src->available.end(),
                                            [&](const VersionSource& x) { return x.version == v; });
    spdlog::info("serve: {}: loading version {} beside the serving one(s)", name, v);
    ModelOptions mo{registry_.get(), &metrics_, options_.now_us, visible_gpus_};
    auto loaded = ModelVersion::Load(*src, vs, mo);
    if (!loaded.ok()) {
      spdlog::error("serve: {}: version {} failed to load; the old version(s) keep serving: {}",
                    name, v, loaded.status().message());
      failed_[VersionKey(vs)] = seen_[VersionKey(vs)];
      for (auto& m : next) {
        if (std::find(current.begin(), current.end(), m) == current.end()) m->Stop(false);
      }
      std::lock_guard<std::mutex> l(mu_);
      load_errors_[name] = loaded.status().message();
      return;
    }
    next.push_back(std::shared_ptr<ModelVersion>(std::move(*loaded)));
  }
  // 4. Swap atomically, then drain and unload what no longer serves.
  {
    std::lock_guard<std::mutex> l(mu_);
    models_[name] = ServedModel{std::move(*src), next};
    load_errors_.erase(name);
  }
  std::string list;
  for (const auto& m : next) list += (list.empty() ? "" : ", ") + std::to_string(m->version());
  spdlog::info("serve: {}: now serving version(s) {}", name, list);
  for (auto& m : current) {
    if (std::find(next.begin(), next.end(), m) == next.end()) m->Stop(true);
  }
}

// KServe v2 (health, metadata, infer, repository), TF Serving's :predict,
// plain /predict, Kubernetes-style probes and Prometheus. Infer comes first:
// it is what is asked most, and no two patterns here match the same path, so
// the order changes nothing else.
Status ServerImpl::AddRoutes() {
  using S = ServerImpl;
  return router_.AddAll({
      {"POST", "/v2/models/{model}/infer", &S::Infer},
      {"POST", "/v2/models/{model}/versions/{version}/infer", &S::Infer},
      {"GET", "/v2/health/live", &S::Live},
      {"GET", "/livez", &S::Live},
      {"GET", "/v2/health/ready", &S::Ready},
      {"GET", "/healthz", &S::Ready},
      {"GET", "/readyz", &S::Ready},
      {"GET", "/v2", &S::ServerMetadata},
      {"GET", "/v2/models/{model}", &S::ModelMetadata},
      {"GET", "/v2/models/{model}/versions/{version}", &S::ModelMetadata},
      {"GET", "/v2/models/{model}/ready", &S::ModelReady},
      {"GET", "/v2/models/{model}/versions/{version}/ready", &S::ModelReady},
      {"GET", "/v2/models/{model}/config", &S::ModelConfigRoute},
      {"GET", "/v2/models/{model}/versions/{version}/config", &S::ModelConfigRoute},
      {"POST", "/predict", &S::Predict},
      {"POST", "/v1/models/{model}:predict", &S::PredictV1},
      {"POST", "/v1/models/{model}/versions/{version}:predict", &S::PredictV1},
      {"POST", "/v2/repository/index", &S::RepositoryIndex},
      {"POST", "/v2/repository/models/{model}/load", &S::RepositoryLoad},
      {"POST", "/v2/repository/models/{model}/unload", &S::RepositoryUnload},
      {"GET", "/metrics", &S::MetricsText},
  });
}

void ServerImpl::Handle(net::HttpRequest req, std::unique_ptr<net::Responder> responder) {
  const Route* route = nullptr;
  net::RouteMatch m = router_.Find(req.method, req.path, &route);
  if (m.kind == net::RouteMatch::Kind::kFound) {
    Call c{req, responder, m.params};
    (this->**route)(c);
    return;
  }
  if (m.kind == net::RouteMatch::Kind::kNotFound) {
    responder->Send(
        ErrorResponse(Status::Msg(Code::kNotFound, "serve.no_route", {{"path", req.path}})));
    return;
  }
  net::HttpResponse r = ErrorResponse(
      Status::Msg(Code::kInvalidArgument, "serve.bad_method",
                  {{"method", req.method}, {"path", req.path}, {"allowed", m.allow}}));
  r.status = 405;
  r.headers.emplace_back("Allow", m.allow);
  responder->Send(std::move(r));
}

void ServerImpl::Live(Call& c) { c.Send(JsonResponse(200, R"({"live":true})")); }

void ServerImpl::Ready(Call& c) {
  bool ready = AllReady();
  c.Send(JsonResponse(ready ? 200 : 503, ready ? R"({"ready":true})" : R"({"ready":false})"));
}

void ServerImpl::MetricsText(Call& c) {
  net::HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = RenderMetrics();
  c.Send(std::move(r));
}

void ServerImpl::ServerMetadata(Call& c) {
  Json ext = Json::array({"binary_tensor_data", "parameters"});
  if (options_.model_control == "explicit") ext.push_back("model_repository");
  c.Send(JsonResponse(
      200, Json{{"name", "lathe"}, {"version", LATHE_VERSION}, {"extensions", ext}}.dump()));
}

void ServerImpl::Predict(Call& c) {
  std::string model = c.req.QueryParam("model").value_or("");
  if (model.empty()) {
    std::lock_guard<std::mutex> l(mu_);
    if (models_.size() != 1)
      return c.Send(ErrorResponse(Status::Msg(Code::kInvalidArgument, "serve.predict_which")));
    model = models_.begin()->first;
  }
  HandlePredict(c.req, c.rsp, model, "");
}

void ServerImpl::PredictV1(Call& c) {
  HandlePredict(c.req, c.rsp, c.Param("model"), c.Param("version"));
}

void ServerImpl::Infer(Call& c) { HandleInfer(c.req, c.rsp, c.Param("model"), c.Param("version")); }

void ServerImpl::ModelReady(Call& c) {
  auto mv = Find(c.Param("model"), c.Param("version"));
  if (!mv.ok()) return c.Send(ErrorResponse(mv.status()));
  const ModelVersion& m = **mv;
  Json j = {{"name", m.name()},
            {"version", std::to_string(m.version())},
            {"ready", m.ready()},
            {"state", std::string(ModelStateName(m.state()))}};
  std::string err = m.last_probe_error();
  if (!err.empty()) j["reason"] = err.substr(0, kReasonMaxChars);
  c.Send(
      JsonResponse(m.ready() ? 200 : 503, j.dump(-1, ' ', false, Json::error_handler_t::replace)));
}

void ServerImpl::ModelConfigRoute(Call& c) {
  auto mv = Find(c.Param("model"), c.Param("version"));
  if (!mv.ok()) return c.Send(ErrorResponse(mv.status()));
  c.Send(JsonResponse(200, ModelConfigToJson((*mv)->config()).dump()));
}

void ServerImpl::ModelMetadata(Call& c) {
  std::string model = c.Param("model");
  auto mv = Find(model, c.Param("version"));
  if (!mv.ok()) return c.Send(ErrorResponse(mv.status()));
  const ModelVersion& m = **mv;
  Json versions = Json::array();
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = models_.find(model);
    if (it != models_.end()) {
      for (const auto& v : it->second.versions) versions.push_back(std::to_string(v->version()));
    }
  }
  Json inputs = Json::array(), outputs = Json::array();
  bool batching = m.config().max_batch_size > 0;
  for (const auto& t : m.config().inputs) inputs.push_back(TensorMetadata(t, batching));
  for (const auto& t : m.config().outputs) outputs.push_back(TensorMetadata(t, batching));
  Json j = {{"name", m.name()},
            {"versions", versions},
            {"platform", m.config().backend},
            {"inputs", inputs},
            {"outputs", outputs}};
  c.Send(JsonResponse(200, j.dump()));
}

Status ServerImpl::SchedulingFrom(const net::HttpRequest& req,
                                  const std::optional<std::string>& param_priority,
                                  int64_t param_timeout_us, const ModelConfig& c,
                                  ModelRequest& mr) const {
  std::string prio = param_priority ? *param_priority : std::string(req.Header("X-Priority"));
  if (!prio.empty()) {
    auto level = ParsePriority(prio, c.batching);
    if (!level) {
      return Status::Msg(Code::kInvalidArgument, "serve.bad_priority",
                         {{"value", prio}, {"levels", std::to_string(c.batching.priority_levels)}});
    }
    mr.priority = *level;
  }
  mr.timeout_us = param_timeout_us;
  std::string_view t = req.Header("X-Timeout-Ms");
  if (mr.timeout_us == 0 && !t.empty()) {
    char* end = nullptr;
    std::string s(t);
    long long ms = std::strtoll(s.c_str(), &end, 10);
    if (*end != '\0' || ms <= 0 || ms > (int64_t{1} << 40)) {
      return Status::Msg(Code::kInvalidArgument, "serve.bad_timeout", {{"value", s}});
    }
    mr.timeout_us = ms * 1000;
  }
  return Status::OK();
}

void ServerImpl::Count(const ModelVersion& mv, const Status& s, int64_t start_us) {
  mv.CountRequest(Outcome(s), static_cast<double>(options_.now_us() - start_us) / 1e6);
}

void ServerImpl::Submit(
    std::shared_ptr<ModelVersion> mv, const std::string& version, ModelRequest mr,
    std::unique_ptr<net::Responder>& rsp,
    std::function<net::HttpResponse(const ModelVersion&, InferResult&)> finish) {
  auto reply = std::make_shared<Reply>();
  reply->responder = std::move(rsp);
  reply->start_us = options_.now_us();
  auto done_for = [this, reply, finish](ModelVersion* raw) {
    return [this, reply, raw, finish](InferResult res) {
      // The model outlives its callbacks: Stop drains before it is destroyed.
      if (res.status.ok()) raw->ObserveQueue(static_cast<double>(res.queue_us) / 1e6);
      net::HttpResponse r = res.status.ok() ? finish(*raw, res) : ErrorResponse(res.status);
      Status outcome = res.status;
      if (outcome.ok() && r.status != 200) outcome = Status::Internal("response encoding failed");
      Count(*raw, outcome, reply->start_us);
      reply->responder->Send(std::move(r));
    };
  };
  Status s = mv->Submit(mr, done_for(mv.get()));
  if (s.code() == Code::kUnavailable && version.empty()) {
    // Swapped out between the lookup and admission (a reload): the version now served takes it.
    auto now = Find(mv->name(), "");
    if (now.ok() && now->get() != mv.get()) {
      mv = *now;
      s = mv->Submit(mr, done_for(mv.get()));
    }
  }
  if (!s.ok()) {
    Count(*mv, s, reply->start_us);
    reply->responder->Send(ErrorResponse(s));
  }
}

void ServerImpl::HandleInfer(net::HttpRequest& req, std::unique_ptr<net::Responder>& rsp,
                             const std::string& model, const std::string& version) {
  auto fail = [&](const Status& s) {
    rsp->Send(ErrorResponse(s));
    rsp.reset();
  };
  auto mv = Find(model, version);
  if (!mv.ok()) return fail(mv.status());
  auto msg = ParseInferRequest(req.body, req.Header("Inference-Header-Content-Length"));
  if (!msg.ok()) {
    Count(**mv, msg.status(), options_.now_us());
    return fail(msg.status());
  }
  const ModelConfig& c = (*mv)->config();
  if (!c.outputs.empty()) {
    for (const auto& o : msg->outputs) {
      if (std::none_of(c.outputs.begin(), c.outputs.end(),
                       [&](const TensorSpec& t) { return t.name == o.name; })) {
        std::string names;
        for (const auto& t : c.outputs) names += (names.empty() ? "" : ", ") + t.name;
        return fail(Status::Msg(Code::kInvalidArgument, "serve.unknown_output",
                                {{"tensor", o.name}, {"model", model}, {"outputs", names}}));
      }
    }
  }
  ModelRequest mr;
  Status s = SchedulingFrom(req, msg->priority, msg->timeout_us, c, mr);
  if (!s.ok()) return fail(s);
  mr.inputs = std::move(msg->inputs);
  Submit(*mv, version, std::move(mr), rsp,
         [id = msg->id, outs = msg->outputs, bin = msg->binary_data_output](const ModelVersion& m,
                                                                            InferResult& res) {
           for (const auto& o : outs) {
             if (std::none_of(res.outputs.begin(), res.outputs.end(),
                              [&](const Tensor& t) { return t.name == o.name; })) {
               return ErrorResponse(
                   Status::Msg(Code::kInvalidArgument, "serve.unknown_output",
                               {{"tensor", o.name}, {"model", m.name()}, {"outputs", "?"}}));
             }
           }
           EncodedResponse e =
               EncodeInferResponse(m.name(), m.version(), id, res.outputs, outs, bin);
           net::HttpResponse r;
           r.content_type = e.content_type;
           r.body = std::move(e.body);
           if (e.header_length > 0) {
             r.headers.emplace_back("Inference-Header-Content-Length",
                                    std::to_string(e.header_length));
           }
           return r;
         });
}

void ServerImpl::HandlePredict(net::HttpRequest& req, std::unique_ptr<net::Responder>& rsp,
                               const std::string& model, const std::string& version) {
  auto fail = [&](const Status& s) {
    rsp->Send(ErrorResponse(s));
    rsp.reset();
  };
  auto mv = Find(model, version);
  if (!mv.ok()) return fail(mv.status());
  const ModelConfig& c = (*mv)->config();
  auto body = ParseJsonBody(req.body);
  if (!body.ok()) return fail(body.status());
  std::string mode = c.parameters.value("predict", c.backend == "process" ? "json" : "tensors");
  ModelRequest mr;
  Status s = SchedulingFrom(req, std::nullopt, 0, c, mr);
  if (!s.ok()) return fail(s);
  if (mode == "json") {
    Tensor t{LATHE_JSON_TENSOR_NAME, DataType::kBytes, {1}, {}};
    AppendBytesElement(t.data, req.body);
    mr.inputs.push_back(std::move(t));
    Submit(*mv, version, std::move(mr), rsp, [](const ModelVersion& m, InferResult& res) {
      for (const auto& o : res.outputs) {
        if (o.name != LATHE_JSON_TENSOR_NAME) continue;
        auto elems = SplitBytesElements(o.data);
        if (elems.ok() && elems->size() == 1) return JsonResponse(200, std::string((*elems)[0]));
      }
      return ErrorResponse(
          Status::Msg(Code::kInternal, "serve.no_json_output", {{"model", m.name()}}));
    });
    return;
  }
  auto tensors = PredictRequestToTensors(*body, c);
  if (!tensors.ok()) return fail(tensors.status());
  mr.inputs = std::move(*tensors);
  Submit(*mv, version, std::move(mr), rsp, [](const ModelVersion&, InferResult& res) {
    return JsonResponse(200, TensorsToPredictResponse(res.outputs));
  });
}

void ServerImpl::RepositoryIndex(Call& c) {
  Json idx = Json::array();
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [name, m] : models_) {
    for (const auto& v : m.versions) {
      idx.push_back({{"name", name},
                     {"version", std::to_string(v->version())},
                     {"state", std::string(ModelStateName(v->state()))},
                     {"reason", v->last_probe_error()}});
    }
  }
  for (const auto& [name, err] : load_errors_) {
    if (models_.count(name) == 0)
      idx.push_back({{"name", name}, {"state", "UNAVAILABLE"}, {"reason", err}});
  }
  c.Send(JsonResponse(200, idx.dump(-1, ' ', false, Json::error_handler_t::replace)));
}

// POST /v2/repository/models/{model}/load|unload
void ServerImpl::RepositoryControl(Call& c, bool load) {
  if (options_.model_control != "explicit") {
    return c.Send(ErrorResponse(Status::Msg(Code::kFailedPrecondition, "serve.model_control_off")));
  }
  std::string name = c.Param("model");
  auto shared = std::make_shared<std::unique_ptr<net::Responder>>(std::move(c.rsp));
  // Loading takes seconds: never on an I/O thread.
  Post([this, name, load, shared] {
    Status s = Status::OK();
    std::vector<std::shared_ptr<ModelVersion>> old;
    if (load) {
      Result<ModelSource> src = Status::NotFound("");
      {
        std::lock_guard<std::mutex> l(mu_);
        auto it = models_.find(name);
        if (it != models_.end() && options_.repository.empty())
          src = it->second.source;  // a --model: same place
      }
      if (!src.ok()) src = LoadModelDir(options_.repository + "/" + name, name);
      Result<std::vector<std::shared_ptr<ModelVersion>>> versions =
          src.ok() ? LoadVersions(*src) : src.status();
      std::lock_guard<std::mutex> l(mu_);
      if (versions.ok()) {
        old = std::move(models_[name].versions);
        models_[name] = ServedModel{std::move(*src), std::move(*versions)};
        load_errors_.erase(name);
      } else {
        s = versions.status();
        load_errors_[name] = s.message();
      }
    } else {
      std::lock_guard<std::mutex> l(mu_);
      auto it = models_.find(name);
      if (it == models_.end()) {
        s = Status::Msg(Code::kNotFound, "serve.unknown_model", {{"model", name}});
      } else {
        old = std::move(it->second.versions);
        models_.erase(it);
      }
    }
    for (auto& v : old) v->Stop(true);  // drain: admitted requests still finish
    (*shared)->Send(s.ok() ? JsonResponse(200, "{}") : ErrorResponse(s));
  });
}

std::string ServerImpl::RenderMetrics() {
  metrics_.ClearGauge("lathe_serve_queue_length");
  metrics_.ClearGauge("lathe_serve_inflight_requests");
  metrics_.ClearGauge("lathe_serve_model_ready");
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [name, m] : models_) {
      for (const auto& v : m.versions) {
        std::string ver = std::to_string(v->version());
        metrics_.Set("lathe_serve_model_ready", {{"model", name}, {"version", ver}},
                     v->ready() ? 1 : 0);
        for (int level = 1; level <= v->config().batching.priority_levels; ++level) {
          Labels lb = {{"model", name}, {"version", ver}, {"priority", std::to_string(level)}};
          metrics_.Set("lathe_serve_queue_length", lb,
                       static_cast<double>(v->queue_size_at(level)));
          metrics_.Set("lathe_serve_inflight_requests", lb,
                       static_cast<double>(v->inflight_at(level)));
        }
      }
    }
  }
  if (gpus_) {
    auto inv = gpus_->Sample();
    if (inv.ok() && inv->source == "nvml") {
      for (const auto& g : inv->gpus) {
        Labels lb = {{"gpu", std::to_string(g.index)}, {"uuid", g.uuid}};
        if (g.utilization_gpu_pct)
          metrics_.Set("lathe_gpu_utilization_ratio", lb, *g.utilization_gpu_pct / 100.0);
        if (g.memory_used_bytes)
          metrics_.Set("lathe_gpu_memory_used_bytes", lb,
                       static_cast<double>(*g.memory_used_bytes));
        if (g.memory_total_bytes)
          metrics_.Set("lathe_gpu_memory_total_bytes", lb,
                       static_cast<double>(*g.memory_total_bytes));
      }
    }
  }
  return metrics_.Render();
}

}  // namespace

Result<std::unique_ptr<ServeServer>> ServeServer::Create(ServeOptions options) {
  auto s = std::make_unique<ServerImpl>(std::move(options));
  RETURN_IF_ERROR(s->Init());
  return std::unique_ptr<ServeServer>(std::move(s));
}

}  // namespace lathe::serve
