// The identity backend: every output is an input, unchanged. It measures the
// server itself (no model time) and drives the server's tests.
//
// Outputs: with `outputs` declared in config.yaml, output i is input i renamed;
// otherwise each input comes back under its own name. "__json__" comes back
// as "__json__" (so /predict echoes its body).
//
// parameters (config.yaml), all optional, for tests:
//   delay_us: N                  sleep N µs in every execute
//   block_while_exists: PATH     execute waits while PATH exists (a "hanging" model)
//   fail_while_exists: PATH      execute fails (UNAVAILABLE, two lines) while PATH exists
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "lathe/serve/backend_api.h"

namespace {

struct Instance {
  std::vector<std::string> output_names;
  int64_t delay_us = 0;
  std::string block_path, fail_path;
};

void SetError(LatheError* err, int code, const std::string& msg) {
  err->code = code;
  std::snprintf(err->message, sizeof err->message, "%s", msg.c_str());
}

bool Exists(const std::string& p) {
  struct stat st;
  return !p.empty() && ::stat(p.c_str(), &st) == 0;
}

int Load(const LatheInstanceSpec* spec, void** out, LatheError* err) {
  try {
    auto cfg = nlohmann::json::parse(spec->config_json);
    auto inst = new Instance();
    for (const auto& o : cfg.value("outputs", nlohmann::json::array()))
      inst->output_names.push_back(o.value("name", ""));
    const auto& p = cfg.value("parameters", nlohmann::json::object());
    inst->delay_us = p.value("delay_us", int64_t{0});
    inst->block_path = p.value("block_while_exists", std::string());
    inst->fail_path = p.value("fail_while_exists", std::string());
    *out = inst;
    return 0;
  } catch (const std::exception& e) {
    SetError(err, LATHE_ERR_INVALID_ARGUMENT, std::string("identity: bad config: ") + e.what());
    return 1;
  }
}

int Execute(void* handle, const LatheTensor* inputs, uint32_t n, const LatheOutputSink* sink,
            LatheError* err) {
  auto* inst = static_cast<Instance*>(handle);
  while (Exists(inst->block_path)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (Exists(inst->fail_path)) {
    // Two lines, as a runtime's error with a traceback has: the host must
    // send the client the first only.
    SetError(err, LATHE_ERR_UNAVAILABLE,
             "identity: failing while " + inst->fail_path +
                 " exists\n  detail for the server's log only");
    return 1;
  }
  if (inst->delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(inst->delay_us));
  for (uint32_t i = 0; i < n; ++i) {
    const LatheTensor& t = inputs[i];
    bool json = std::strcmp(t.name, LATHE_JSON_TENSOR_NAME) == 0;
    const char* name =
        (!json && i < inst->output_names.size()) ? inst->output_names[i].c_str() : t.name;
    void* buf = sink->alloc(sink->ctx, name, t.datatype, t.rank, t.shape, t.byte_size);
    if (buf == nullptr) {
      SetError(err, LATHE_ERR_INTERNAL, std::string("identity: output '") + name + "' refused");
      return 1;
    }
    if (t.byte_size > 0) std::memcpy(buf, t.data, t.byte_size);
  }
  return 0;
}

void Unload(void* handle) { delete static_cast<Instance*>(handle); }

// A plain copy may run on the server's I/O thread; the test parameters sleep
// or poll the file system, so they keep the instance's own thread.
int RunsInline(void* handle) {
  auto* inst = static_cast<Instance*>(handle);
  return inst->delay_us == 0 && inst->block_path.empty() && inst->fail_path.empty();
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int lathe_backend_init(uint32_t host_api_version,
                                                                         LatheBackendApi* api,
                                                                         LatheError* err) {
  api->api_version = LATHE_BACKEND_API_VERSION;
  if (host_api_version != LATHE_BACKEND_API_VERSION) {
    SetError(err, LATHE_ERR_UNSUPPORTED, "identity backend implements API version 1");
    return 1;
  }
  api->name = "identity";
  api->runtime_version = "identity 1";
  api->load = Load;
  api->execute = Execute;
  api->unload = Unload;
  if (api->struct_size >= offsetof(LatheBackendApi, runs_inline) + sizeof api->runs_inline) {
    api->runs_inline = RunsInline;
  }
  return 0;
}
