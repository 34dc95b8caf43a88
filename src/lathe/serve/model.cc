#include "lathe/serve/model.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lathe/os/clock.h"
#include "lathe/serve/protocol.h"

namespace lathe::serve {
namespace {

std::string Names(const std::vector<TensorSpec>& specs) {
  std::string s;
  for (const auto& t : specs) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

bool DimsMatch(const Shape& want, const Shape& got, size_t offset) {
  if (got.size() != want.size() + offset) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != -1 && want[i] != got[i + offset]) return false;
  }
  return true;
}

std::vector<TensorSpec> SpecsFromDescribe(const Json& list) {
  std::vector<TensorSpec> out;
  if (!list.is_array()) return out;
  for (const auto& t : list) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) return {};
    TensorSpec s;
    s.name = t["name"].get<std::string>();
    if (t.contains("datatype") && t["datatype"].is_string()) {
      s.datatype = ParseDataType(t["datatype"].get<std::string>()).value_or(DataType::kInvalid);
    }
    if (t.contains("dims") && t["dims"].is_array()) s.dims = t["dims"].get<Shape>();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::string_view ModelStateName(ModelState s) {
  switch (s) {
    case ModelState::kLoading:
      return "LOADING";
    case ModelState::kReady:
      return "READY";
    case ModelState::kUnhealthy:
      return "UNHEALTHY";
    case ModelState::kUnloading:
      return "UNLOADING";
    case ModelState::kUnloaded:
      return "UNAVAILABLE";
    case ModelState::kFailed:
      return "FAILED";
  }
  return "?";
}

std::string_view RequestOutcomeName(RequestOutcome o) {
  switch (o) {
    case RequestOutcome::kSuccess:
      return "success";
    case RequestOutcome::kInvalid:
      return "invalid";
    case RequestOutcome::kRejected:
      return "rejected";
    case RequestOutcome::kTimeout:
      return "timeout";
    case RequestOutcome::kUnavailable:
      return "unavailable";
    case RequestOutcome::kError:
      return "error";
  }
  return "error";
}

bool ModelTransitionAllowed(ModelState from, ModelState to) {
  using S = ModelState;
  switch (from) {
    case S::kLoading:
      return to == S::kReady || to == S::kFailed || to == S::kUnloading;
    case S::kReady:
      return to == S::kUnhealthy || to == S::kUnloading;
    case S::kUnhealthy:
      return to == S::kReady || to == S::kUnloading;
    case S::kUnloading:
      return to == S::kUnloaded;
    case S::kUnloaded:
    case S::kFailed:
      return false;
  }
  return false;
}

std::vector<Tensor> GeneratedWarmup(const ModelConfig& c) {
  std::vector<Tensor> out;
  if (c.inputs.empty()) return out;
  for (const auto& in : c.inputs) {
    if (!in.dims || in.datatype == DataType::kInvalid) return {};
    Tensor t;
    t.name = in.name;
    t.datatype = in.datatype;
    if (c.max_batch_size > 0) t.shape.push_back(1);
    for (int64_t d : *in.dims) {
      if (d < 0) return {};
      t.shape.push_back(d);
    }
    int64_t n = ElementCount(t.shape);
    if (in.datatype == DataType::kBytes) {
      for (int64_t i = 0; i < n; ++i) AppendBytesElement(t.data, "");
    } else {
      t.data.assign(static_cast<size_t>(n) * DataTypeSize(in.datatype), '\0');
    }
    out.push_back(std::move(t));
  }
  return out;
}

Result<std::vector<Tensor>> WarmupFromConfig(const ModelConfig& c) {
  std::vector<Tensor> out;
  const Json& w = c.warmup;
  if (w.is_null()) return GeneratedWarmup(c);
  if (w.is_boolean()) return out;  // warmup: false
  if (w.contains("json")) {
    Tensor t{LATHE_JSON_TENSOR_NAME, DataType::kBytes, {1}, {}};
    AppendBytesElement(t.data, w["json"].dump());
    out.push_back(std::move(t));
    return out;
  }
  for (auto it = w["inputs"].begin(); it != w["inputs"].end(); ++it) {
    DataType dt = DataType::kInvalid;
    for (const auto& in : c.inputs) {
      if (in.name == it.key()) dt = in.datatype;
    }
    if (it->contains("datatype") && (*it)["datatype"].is_string()) {
      dt = ParseDataType((*it)["datatype"].get<std::string>()).value_or(DataType::kInvalid);
    }
    if (dt == DataType::kInvalid) {
      return Status::Msg(Code::kInvalidArgument, "serve.config_missing",
                         {{"file", c.file}, {"field", "warmup.inputs." + it.key() + ".datatype"}});
    }
    Shape shape;
    for (const auto& d : (*it)["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) {
        return Status::Msg(Code::kInvalidArgument, "serve.config_value",
                           {{"file", c.file},
                            {"field", "warmup.inputs." + it.key() + ".shape"},
                            {"value", (*it)["shape"].dump()},
                            {"allowed", "a list of non-negative integers"}});
      }
      shape.push_back(d.get<int64_t>());
    }
    auto t = TensorFromJsonData(it.key(), dt, shape, (*it)["data"]);
    if (!t.ok()) return t.status().WithContext(c.file + ": warmup");
    out.push_back(std::move(*t));
  }
  return out;
}

ModelVersion::ModelVersion(ModelConfig config, VersionSource version, ModelOptions options)
    : config_(std::move(config)), version_(std::move(version)), options_([&] {
        if (!options.now_us) options.now_us = os::RealMonotonicUs;
        return std::move(options);
      }()) {}

ModelVersion::~ModelVersion() { Stop(false); }

void ModelVersion::SetState(ModelState to) {
  std::lock_guard<std::mutex> l(transition_mu_);
  ModelState from = state_.load();
  if (from == to) return;
  if (!ModelTransitionAllowed(from, to)) {
    spdlog::error("serve: {} v{}: refused state change {} -> {}", config_.name, version_.version,
                  ModelStateName(from), ModelStateName(to));
    return;
  }
  state_ = to;
  spdlog::info("serve: {} v{}: {} -> {}", config_.name, version_.version, ModelStateName(from),
               ModelStateName(to));
  if (options_.metrics) {
    options_.metrics->Set("lathe_serve_model_ready", ModelLabels(),
                          to == ModelState::kReady ? 1 : 0);
  }
}

Labels ModelVersion::ModelLabels() const {
  return {{"model", config_.name}, {"version", std::to_string(version_.version)}};
}

void ModelVersion::ResolveSeries() {
  Metrics* m = options_.metrics;
  if (m == nullptr) return;
  Labels labels = ModelLabels();
  for (int o = 0; o < kRequestOutcomes; ++o) {
    Labels with_outcome = labels;
    with_outcome.emplace_back("outcome",
                              std::string(RequestOutcomeName(static_cast<RequestOutcome>(o))));
    series_.requests[static_cast<size_t>(o)] =
        m->Resolve("lathe_serve_requests_total", with_outcome);
  }
  series_.request_duration = m->Resolve("lathe_serve_request_duration_seconds", labels);
  series_.queue_duration = m->Resolve("lathe_serve_queue_duration_seconds", labels);
  series_.batch_size = m->Resolve("lathe_serve_batch_size", labels);
  series_.compute_duration = m->Resolve("lathe_serve_compute_duration_seconds", labels);
}

void ModelVersion::CountRequest(RequestOutcome outcome, double duration_s) const {
  Metrics* m = options_.metrics;
  if (m == nullptr) return;
  m->Add(series_.requests[static_cast<size_t>(outcome)]);
  m->Observe(series_.request_duration, duration_s);
}

void ModelVersion::ObserveQueue(double wait_s) const {
  if (options_.metrics != nullptr) options_.metrics->Observe(series_.queue_duration, wait_s);
}

Status ModelVersion::LoadInstances(const ModelSource& source) {
  auto got = options_.registry->Get(config_.backend);
  if (!got.ok() && (got.status().msg_id() == "serve.backend_missing" ||
                    got.status().msg_id() == "serve.backends_none")) {
    MsgArgs args = got.status().args();
    args.push_back({"file", config_.file.empty() ? "--model " + config_.name : config_.file});
    return Status::Msg(got.status().code(), got.status().msg_id(), std::move(args));
  }
  if (!got.ok()) return got.status();
  const BackendLibrary* lib = *got;
  int index = 0;
  std::string config_json = ModelConfigToJson(config_).dump();
  // threads_per_instance 0: the cores shared by the instances, set explicitly
  // (LibTorch would otherwise pick its own default, 1 on some machines).
  int total = 0;
  for (const auto& g : config_.instances) {
    total += g.count * (g.device == DeviceKind::kAuto ? std::max(1, options_.visible_gpus) : 1);
  }
  int threads =
      config_.threads_per_instance > 0
          ? config_.threads_per_instance
          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / std::max(1, total));
  for (const auto& g : config_.instances) {
    // `auto`: one group per visible GPU, or the CPU when there is none.
    std::vector<std::pair<std::string, int>> devices;
    if (g.device == DeviceKind::kCpu ||
        (g.device == DeviceKind::kAuto && options_.visible_gpus == 0)) {
      devices.emplace_back("cpu", -1);
    } else if (g.device == DeviceKind::kAuto) {
      for (int d = 0; d < options_.visible_gpus; ++d) devices.emplace_back("cuda", d);
    } else {
      if (g.device_index >= options_.visible_gpus) {
        return Status::Msg(Code::kFailedPrecondition, "serve.no_such_gpu",
                           {{"file", config_.file},
                            {"device", "cuda:" + std::to_string(g.device_index)},
                            {"visible", std::to_string(options_.visible_gpus)}});
      }
      devices.emplace_back("cuda", g.device_index);
    }
    for (const auto& [kind, dev] : devices) {
      for (int k = 0; k < g.count; ++k) {
        ModelInstance::Options o;
        o.library = lib;
        o.spec = InstanceSpec{config_.name,
                              version_.version,
                              source.model_dir,
                              version_.dir,
                              version_.model_file,
                              config_json,
                              kind,
                              dev,
                              index++,
                              threads,
                              config_.max_batch_size};
        o.max_batch_size = config_.max_batch_size;
        o.now_us = options_.now_us;
        o.on_idle = [this] {
          if (batcher_) batcher_->Wake();
        };
        if (Metrics* m = options_.metrics; m != nullptr) {
          o.on_batch = [m, rows = series_.batch_size,
                        compute = series_.compute_duration](const BatchOutcome& b) {
            m->Observe(rows, static_cast<double>(b.rows));
            m->Observe(compute, static_cast<double>(b.compute_us) / 1e6);
          };
        }
        auto inst = ModelInstance::Create(std::move(o));
        if (!inst.ok()) return inst.status();
        instances_.push_back(std::move(*inst));
      }
    }
  }
  return Status::OK();
}

Status ModelVersion::BuildWarmup() {
  // Tensors the config leaves out come from the model when the backend can tell.
  if (config_.inputs.empty() || config_.outputs.empty()) {
    Json d = instances_.front()->Describe();
    if (d.is_object()) {
      if (config_.inputs.empty()) config_.inputs = SpecsFromDescribe(d.value("inputs", Json()));
      if (config_.outputs.empty()) config_.outputs = SpecsFromDescribe(d.value("outputs", Json()));
    }
  }
  ASSIGN_OR_RETURN(warmup_, WarmupFromConfig(config_));
  if (warmup_.empty()) return Status::OK();  // no sample: no warm-up, no probes
  for (auto& inst : instances_) {
    Status s = inst->Warmup(warmup_);
    if (!s.ok()) {
      return Status::Msg(s.code(), "serve.warmup_failed",
                         {{"model", config_.name},
                          {"version", std::to_string(version_.version)},
                          {"detail", s.message()}});
    }
  }
  return Status::OK();
}

Result<std::unique_ptr<ModelVersion>> ModelVersion::Load(const ModelSource& source,
                                                         const VersionSource& version,
                                                         ModelOptions options) {
  std::unique_ptr<ModelVersion> m(new ModelVersion(source.config, version, std::move(options)));
  m->ResolveSeries();
  Status s = m->LoadInstances(source);
  if (s.ok()) s = m->BuildWarmup();
  if (m->options_.metrics != nullptr) {
    m->options_.metrics->Add("lathe_serve_model_loads_total",
                             {{"model", m->name()},
                              {"version", std::to_string(version.version)},
                              {"outcome", s.ok() ? "success" : "failure"}});
  }
  if (!s.ok()) {
    m->SetState(ModelState::kFailed);
    for (auto& i : m->instances_) i->Stop();
    return s.WithContext(fmt::format("model {} version {}", m->name(), version.version));
  }
  Batcher::Options bo;
  bo.batching = m->config_.batching;
  bo.max_batch_size = m->config_.max_batch_size;
  bo.now_us = m->options_.now_us;
  m->batcher_ = std::make_unique<Batcher>(std::move(bo), *m);
  {
    std::lock_guard<std::mutex> l(m->probe_mu_);
    m->probe_done_us_ = m->options_.now_us();
  }
  m->SetState(ModelState::kReady);
  return m;
}

Status ModelVersion::Validate(ModelRequest& req, std::string& key, int64_t& rows) const {
  const bool batching = config_.max_batch_size > 0;
  // 1. The JSON form (/predict): one BYTES element per request.
  if (req.inputs.size() == 1 && req.inputs[0].name == LATHE_JSON_TENSOR_NAME) {
    rows = 1;
    key = LATHE_JSON_TENSOR_NAME;
    if (!batching) req.inputs[0].shape = {1};
    return ValidateTensorData(req.inputs[0]);
  }
  // 2. Names: every input declared (when declared) and none missing; config order.
  if (!config_.inputs.empty()) {
    for (const auto& t : req.inputs) {
      bool known = std::any_of(config_.inputs.begin(), config_.inputs.end(),
                               [&](const TensorSpec& s) { return s.name == t.name; });
      if (!known) {
        return Status::Msg(
            Code::kInvalidArgument, "serve.unknown_input",
            {{"tensor", t.name}, {"model", config_.name}, {"inputs", Names(config_.inputs)}});
      }
    }
    std::vector<Tensor> ordered;
    for (const auto& s : config_.inputs) {
      auto it = std::find_if(req.inputs.begin(), req.inputs.end(),
                             [&](const Tensor& t) { return t.name == s.name; });
      if (it == req.inputs.end()) {
        return Status::Msg(
            Code::kInvalidArgument, "serve.missing_input",
            {{"tensor", s.name}, {"model", config_.name}, {"inputs", Names(config_.inputs)}});
      }
      ordered.push_back(std::move(*it));
    }
    req.inputs = std::move(ordered);
  }
  // 3. Datatypes, shapes, data; the batch dimension is the same for all inputs.
  rows = batching ? -1 : 1;
  key.clear();
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    const Tensor& t = req.inputs[i];
    const TensorSpec* spec = config_.inputs.empty() ? nullptr : &config_.inputs[i];
    if (spec != nullptr && spec->datatype != DataType::kInvalid && spec->datatype != t.datatype) {
      return WrongInput("serve.wrong_datatype", t.name, std::string(DataTypeName(spec->datatype)),
                        std::string(DataTypeName(t.datatype)), "");
    }
    if (batching) {
      if (t.shape.empty() || t.shape[0] < 1 || t.shape[0] > config_.max_batch_size ||
          (rows >= 0 && t.shape[0] != rows)) {
        return Status::Msg(Code::kInvalidArgument, "serve.bad_batch_dim",
                           {{"tensor", t.name},
                            {"shape", ShapeString(t.shape)},
                            {"max", std::to_string(config_.max_batch_size)}});
      }
      rows = t.shape[0];
    }
    if (spec != nullptr && spec->dims && !DimsMatch(*spec->dims, t.shape, batching ? 1 : 0)) {
      Shape want = *spec->dims;
      if (batching) want.insert(want.begin(), -1);
      return WrongInput("serve.wrong_shape", t.name, ShapeString(want), ShapeString(t.shape),
                        " (-1: any size)");
    }
    RETURN_IF_ERROR(ValidateTensorData(t));
    key += t.name + ':' + std::string(DataTypeName(t.datatype));
    for (size_t d = batching ? 1 : 0; d < t.shape.size(); ++d)
      key += ',' + std::to_string(t.shape[d]);
    key += ';';
  }
  if (rows < 0) rows = 1;
  return Status::OK();
}

Status ModelVersion::Submit(ModelRequest& req, InferCallback done) {
  ModelState s = state();
  if (s != ModelState::kReady && s != ModelState::kUnhealthy) {
    return Status::Msg(Code::kUnavailable, "serve.model_not_ready",
                       {{"model", config_.name}, {"state", std::string(ModelStateName(s))}});
  }
  auto r = std::make_unique<PendingRequest>();
  RETURN_IF_ERROR(Validate(req, r->shape_key, r->rows));
  const auto& b = config_.batching;
  int level = req.priority > 0 ? std::min(req.priority, b.priority_levels) : b.default_priority;
  level = std::clamp(level, 1, std::min(b.priority_levels, kMaxLevels - 1));
  r->inputs = std::move(req.inputs);
  r->priority = level;
  auto* counter = &inflight_[static_cast<size_t>(level)];
  counter->fetch_add(1);
  r->done = [counter, done = std::move(done)](InferResult res) {
    counter->fetch_sub(1);
    done(std::move(res));
  };
  Status st = batcher_->Submit(r, req.timeout_us);
  if (!st.ok()) {
    counter->fetch_sub(1);
    req.inputs = std::move(r->inputs);
  }
  return st;
}

bool ModelVersion::CanDispatch() {
  for (const auto& i : instances_) {
    if (i->idle()) return true;
  }
  return false;
}

ClaimedBatch ModelVersion::Dispatch(Batch batch) {
  // The least-loaded instance: an idle one; ties go round-robin from the last pick.
  size_t n = instances_.size();
  size_t start = static_cast<size_t>(next_instance_.fetch_add(1) % n);
  size_t best = start;
  for (size_t k = 0; k < n; ++k) {
    if (instances_[(start + k) % n]->idle()) {
      best = (start + k) % n;
      break;
    }
  }
  ModelInstance& inst = *instances_[best];
  if (inst.runs_inline() && inst.TryClaim())
    return ClaimedBatch{static_cast<int>(best), std::move(batch)};
  inst.Run(std::move(batch));
  return {};
}

void ModelVersion::RunClaimed(ClaimedBatch claimed) {
  instances_[static_cast<size_t>(claimed.instance)]->RunClaimed(std::move(claimed.batch));
}

void ModelVersion::ProbeTick() {
  if (config_.health_probe_interval_ms <= 0 || warmup_.empty()) return;
  ModelState s = state();
  if (s != ModelState::kReady && s != ModelState::kUnhealthy) return;
  const int64_t now = options_.now_us();
  const int64_t interval = config_.health_probe_interval_ms * 1000;
  std::unique_lock<std::mutex> l(probe_mu_);
  if (probe_outstanding_) {
    if (now - probe_sent_us_ > interval && s == ModelState::kReady) {
      probe_error_ = fmt::format("the health probe has not been answered for {} ms",
                                 (now - probe_sent_us_) / 1000);
      spdlog::warn("serve: {} v{}: {}", config_.name, version_.version, probe_error_);
      SetState(ModelState::kUnhealthy);
    }
    return;
  }
  if (now - probe_done_us_ < interval) return;
  auto r = std::make_unique<PendingRequest>();
  ModelRequest req{warmup_, 1, 0};
  Status v = Validate(req, r->shape_key, r->rows);
  if (!v.ok()) return;
  r->inputs = std::move(req.inputs);
  r->priority = 1;
  r->bypass_limits = true;
  r->done = [this](InferResult res) {
    std::lock_guard<std::mutex> l(probe_mu_);
    probe_outstanding_ = false;
    probe_done_us_ = options_.now_us();
    if (res.status.ok()) {
      probe_error_.clear();
      if (state() == ModelState::kUnhealthy) SetState(ModelState::kReady);
    } else {
      probe_error_ = res.status.message();
      spdlog::warn("serve: {} v{}: health probe failed: {}", config_.name, version_.version,
                   probe_error_);
      if (state() == ModelState::kReady) SetState(ModelState::kUnhealthy);
    }
  };
  probe_outstanding_ = true;
  probe_sent_us_ = now;
  l.unlock();  // an instance that runs inline answers inside Submit, and `done` takes probe_mu_
  if (!batcher_->Submit(r, 0).ok()) {
    l.lock();
    probe_outstanding_ = false;
  }
}

std::string ModelVersion::last_probe_error() const {
  std::lock_guard<std::mutex> l(probe_mu_);
  return probe_error_;
}

void ModelVersion::Stop(bool drain) {
  ModelState s = state();
  if (s == ModelState::kUnloaded) return;
  if (s != ModelState::kFailed) SetState(ModelState::kUnloading);
  if (batcher_) batcher_->Stop(drain);
  for (auto& i : instances_) i->Stop();
  if (s != ModelState::kFailed) SetState(ModelState::kUnloaded);
}

size_t ModelVersion::queue_size_at(int level) const {
  return batcher_ ? batcher_->queue_size_at(level) : 0;
}

int64_t ModelVersion::inflight_at(int level) const {
  if (level < 1 || level >= kMaxLevels) return 0;
  return inflight_[static_cast<size_t>(level)].load();
}

}  // namespace lathe::serve
