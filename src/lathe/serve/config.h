// A model's config.yaml: what it is, how it batches, where it runs.
//
//   backend: torchscript            # torchscript | process | identity | <any installed backend>
//   max_batch_size: 32              # 0: the model does not batch (dims are the full shape)
//   inputs:  [{name: x, datatype: FP32, dims: [4]}]     # dims exclude the batch dim; -1 = variable
//   outputs: [{name: y, datatype: FP32, dims: [3]}]
//   dynamic_batching:               # present = on (else one request per execution)
//     max_queue_delay_us: 500
//     preferred_batch_sizes: [8, 16]
//     priority_levels: 3            # 1 is the highest; X-Priority: high=1, low=N
//     default_priority: 2
//     queue: {max_size: 1024, timeout_us: 0, on_timeout: reject, allow_timeout_override: true}
//     priority_queues: {1: {max_size: 64}}   # per-level overrides of `queue`
//   instances: [{count: 2, device: cpu}]     # device: cpu | cuda:N | auto
//   threads_per_instance: 1
//   version_policy: {latest: 1}     # {latest: N} | {all: true} | {specific: [1, 3]}
//   default_model_filename: model.pt
//   health_probe_interval: 10s      # 0 turns probes off
//   warmup: {inputs: {x: {data: [...], shape: [1, 4]}}} | {json: {...}} | false
//   parameters: {...}               # backend-specific (see docs/serving.md)
//
// Parsing is strict: an unknown field, a wrong type or a value outside the
// allowed set is InvalidArgument naming the file, the field path and the
// allowed values (catalog ids serve.config_*).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/serve/tensor.h"

namespace lathe::serve {

struct TensorSpec {
  std::string name;
  DataType datatype = DataType::kInvalid;  // kInvalid: not declared, any datatype accepted
  std::optional<Shape> dims;  // without the batch dim; -1 = variable; nullopt = any rank
};

enum class TimeoutAction { kReject, kDelay };

struct QueuePolicy {
  size_t max_size = 1024;  // requests waiting at this level; 0 = unbounded
  int64_t timeout_us = 0;  // how long a request may wait in the queue; 0 = forever
  TimeoutAction on_timeout = TimeoutAction::kReject;  // reject: 503; delay: behind the rest
  bool allow_timeout_override = true;                 // a request may set a shorter/longer timeout
};

struct BatchingConfig {
  bool enabled = false;                    // `dynamic_batching` is present
  int64_t max_queue_delay_us = 0;          // longest the oldest request waits for a fuller batch
  std::vector<int> preferred_batch_sizes;  // ascending, each <= max_batch_size
  int priority_levels = 3;                 // 1 = highest
  int default_priority = 2;                // level of requests that name none
  std::vector<QueuePolicy> queues;         // one per level, index = level - 1
};

enum class DeviceKind { kCpu, kCuda, kAuto };

struct InstanceGroup {
  int count = 1;
  DeviceKind device = DeviceKind::kCpu;
  int device_index = -1;  // cuda:N → N (among visible devices); otherwise -1
};

struct VersionPolicy {
  enum class Kind { kLatest, kAll, kSpecific };
  Kind kind = Kind::kLatest;
  int latest = 1;
  std::vector<int64_t> versions;  // kSpecific
};

struct ModelConfig {
  std::string file;  // where it was read from; "" for generated defaults
  std::string name;
  std::string backend;
  int max_batch_size = 0;
  std::vector<TensorSpec> inputs;   // empty: not declared (from the model, or anything)
  std::vector<TensorSpec> outputs;  // empty: not declared (whatever the model returns)
  BatchingConfig batching;
  std::vector<InstanceGroup> instances;  // never empty after parsing
  int threads_per_instance = 0;          // 0: cores / instances (the backend is always told)
  VersionPolicy version_policy;
  std::string default_model_filename;  // "" = the backend's default
  Json warmup;                         // null: generated if possible; false: none
  int64_t health_probe_interval_ms = 10000;
  Json parameters = Json::object();
};

// Parses and validates config.yaml text. `file` is named in errors;
// `dir_name` (the model's directory) is the default `name`, and a different
// `name` in the file is an error.
Result<ModelConfig> ParseModelConfig(std::string_view yaml, const std::string& file,
                                     const std::string& dir_name);
// The same from already-parsed JSON (tests, generated configs).
Result<ModelConfig> ModelConfigFromJson(const Json& j, const std::string& file,
                                        const std::string& dir_name);

// A config with every default, for `--model NAME=PATH` without a config.yaml.
ModelConfig DefaultModelConfig(const std::string& name, const std::string& backend);

// The canonical JSON form (what backends receive and GET .../config shows).
Json ModelConfigToJson(const ModelConfig& c);

// "high" → 1, "low" → levels, "normal" → default, "<n>" → n (1..levels).
// nullopt when the text is none of these.
std::optional<int> ParsePriority(std::string_view text, const BatchingConfig& b);

// The model file's default name per backend: model.pt, handler.py, "".
std::string DefaultModelFilename(const std::string& backend);

}  // namespace lathe::serve
