// The TorchScript backend: LibTorch's torch::jit::load, one module copy per
// instance, InferenceMode, an explicit intra-op thread count.
//
// Inputs go to forward() by name when its argument names match the config's
// inputs, else in the config's (or the request's) order. Outputs: a Tensor, a
// tuple/list of Tensors, or a dict str → Tensor; named after the config's
// outputs in order (or the dict's keys), else output__0, output__1, ...
// Without outputs in the config, the model's metadata declares those that
// forward()'s return type fixes (a Tensor, a Tuple of Tensors) by the same
// names; a List or Dict return declares none.
//
// Errors a user meets first are explained: a missing or unreadable file, a
// torch.save'd state_dict or pickled module instead of a TorchScript archive,
// an archive newer than this LibTorch, a CUDA device without CUDA. When
// forward() fails on a request's tensors (a wrong shape or dtype), the
// client gets the error alone as INVALID_ARGUMENT (400), and the server's
// log the TorchScript traceback after it.
#include <ATen/Parallel.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/cuda.h>
#include <torch/script.h>
#include <torch/version.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/serve/backend_api.h"

namespace {

using nlohmann::json;
constexpr int kWarmupRuns = 3;  // the profiling executor specialises after two runs

const char* const kSaveHint =
    "export it as TorchScript: torch.jit.script(model).save('model.pt') (or torch.jit.trace(model, "
    "example).save(...))";

void SetError(LatheError* err, int code, const std::string& msg) {
  err->code = code;
  std::snprintf(err->message, sizeof err->message, "%s", msg.c_str());
}

std::string Short(const c10::Error& e) { return e.what_without_backtrace(); }

struct Instance {
  torch::jit::Module module;
  torch::Device device = torch::kCPU;
  int threads = 0;
  std::vector<std::string> input_names;   // config order (may be empty)
  std::vector<std::string> output_names;  // config order (may be empty)
  std::vector<std::string> arg_names;     // forward()'s, without self
  // How many tensors forward() returns, from its declared return type (a
  // Tensor: 1, a Tuple of N Tensors: N); 0 when the type does not say (a
  // List or a Dict, whose length or keys are known only once it ran).
  size_t output_count = 0;
};

// The outputs forward()'s schema fixes: as Run names them (OutName).
size_t DeclaredOutputs(const c10::FunctionSchema& schema) {
  if (schema.returns().size() != 1) return 0;
  const c10::TypePtr& t = schema.returns()[0].type();
  if (t->kind() == c10::TypeKind::TensorType) return 1;
  if (t->kind() != c10::TypeKind::TupleType) return 0;
  const auto& items = t->expectRef<c10::TupleType>().elements();
  for (const auto& e : items) {
    if (e->kind() != c10::TypeKind::TensorType) return 0;
  }
  return items.size();
}

bool TorchType(int32_t dt, c10::ScalarType& out) {
  switch (dt) {
    case LATHE_TYPE_BOOL:
      out = torch::kBool;
      return true;
    case LATHE_TYPE_UINT8:
      out = torch::kUInt8;
      return true;
    case LATHE_TYPE_INT8:
      out = torch::kInt8;
      return true;
    case LATHE_TYPE_INT16:
      out = torch::kInt16;
      return true;
    case LATHE_TYPE_INT32:
      out = torch::kInt32;
      return true;
    case LATHE_TYPE_INT64:
      out = torch::kInt64;
      return true;
    case LATHE_TYPE_FP16:
      out = torch::kFloat16;
      return true;
    case LATHE_TYPE_BF16:
      out = torch::kBFloat16;
      return true;
    case LATHE_TYPE_FP32:
      out = torch::kFloat32;
      return true;
    case LATHE_TYPE_FP64:
      out = torch::kFloat64;
      return true;
    default:
      return false;
  }
}

int32_t LatheType(c10::ScalarType t) {
  switch (t) {
    case torch::kBool:
      return LATHE_TYPE_BOOL;
    case torch::kUInt8:
      return LATHE_TYPE_UINT8;
    case torch::kInt8:
      return LATHE_TYPE_INT8;
    case torch::kInt16:
      return LATHE_TYPE_INT16;
    case torch::kInt32:
      return LATHE_TYPE_INT32;
    case torch::kInt64:
      return LATHE_TYPE_INT64;
    case torch::kFloat16:
      return LATHE_TYPE_FP16;
    case torch::kBFloat16:
      return LATHE_TYPE_BF16;
    case torch::kFloat32:
      return LATHE_TYPE_FP32;
    case torch::kFloat64:
      return LATHE_TYPE_FP64;
    default:
      return LATHE_TYPE_INVALID;
  }
}

// Explains a file that is not a loadable TorchScript archive; "" when it looks fine.
std::string CheckArchive(const std::string& path, int& code) {
  code = LATHE_ERR_INVALID_ARGUMENT;
  if (::access(path.c_str(), R_OK) != 0) {
    int e = errno;
    code = e == EACCES ? LATHE_ERR_PERMISSION_DENIED : LATHE_ERR_NOT_FOUND;
    if (e == ENOENT) {
      return "model file " + path +
             " does not exist: put the TorchScript archive at <version>/model.pt "
             "(or name the file with default_model_filename in config.yaml)";
    }
    return "cannot read model file " + path + ": " + std::strerror(e) +
           (e == EACCES ? " (check its permissions and the directories above it)" : "");
  }
  char magic[4] = {0, 0, 0, 0};
  std::ifstream f(path, std::ios::binary);
  f.read(magic, 4);
  if (!(magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4)) {
    if (static_cast<unsigned char>(magic[0]) == 0x80) {
      return path +
             " is a pickled Python object (torch.save with the legacy format), not a TorchScript "
             "archive; " +
             kSaveHint;
    }
    return path + " is not a TorchScript archive (not a zip file); " + kSaveHint;
  }
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    bool has_code = false;
    for (const auto& r : reader.getAllRecords()) {
      if (r.rfind("code/", 0) == 0) has_code = true;
    }
    if (!reader.hasRecord("constants.pkl") || !has_code) {
      return path +
             " was written by torch.save (a state_dict or a pickled nn.Module), not by "
             "TorchScript: "
             "LibTorch cannot rebuild Python classes from it; " +
             kSaveHint;
    }
  } catch (const c10::Error& e) {
    std::string m = Short(e);
    if (m.find("maximum supported version") != std::string::npos) {
      return path +
             " was written by a newer PyTorch than this LibTorch " TORCH_VERSION
             " can read (archive format: " +
             m.substr(0, m.find('\n')) +
             "); save it with torch " TORCH_VERSION
             " (or older), or build lathe against a newer LibTorch";
    }
    return path + " is not a readable TorchScript archive: " + m.substr(0, m.find('\n'));
  }
  return "";
}

int Load(const LatheInstanceSpec* spec, void** out, LatheError* err) {
  try {
    json cfg = json::parse(spec->config_json);
    auto inst = std::make_unique<Instance>();
    for (const auto& t : cfg.value("inputs", json::array()))
      inst->input_names.push_back(t.value("name", ""));
    for (const auto& t : cfg.value("outputs", json::array()))
      inst->output_names.push_back(t.value("name", ""));
    inst->threads = spec->threads;
    if (std::strcmp(spec->device_kind, "cuda") == 0) {
      if (!torch::cuda::is_available()) {
        SetError(err, LATHE_ERR_UNSUPPORTED,
                 "device cuda:" + std::to_string(spec->device_index) +
                     " was asked for, but this LibTorch " + TORCH_VERSION +
                     " has no usable CUDA (Debian's libtorch is CPU-only): point Torch_DIR at a "
                     "CUDA build of LibTorch and rebuild, or use device: cpu");
        return 1;
      }
      inst->device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(spec->device_index));
    }
    int code = 0;
    std::string why = CheckArchive(spec->model_file, code);
    if (!why.empty()) {
      SetError(err, code, why);
      return 1;
    }
    if (inst->threads > 0) at::set_num_threads(inst->threads);
    inst->module = torch::jit::load(spec->model_file, inst->device);
    inst->module.eval();
    const auto& schema = inst->module.get_method("forward").function().getSchema();
    for (size_t i = 1; i < schema.arguments().size(); ++i)
      inst->arg_names.push_back(schema.arguments()[i].name());
    inst->output_count = DeclaredOutputs(schema);
    *out = inst.release();
    return 0;
  } catch (const c10::Error& e) {
    SetError(err, LATHE_ERR_INVALID_ARGUMENT,
             std::string("torch::jit::load(") + spec->model_file + "): " + Short(e));
  } catch (const std::exception& e) {
    SetError(err, LATHE_ERR_INTERNAL, std::string("torchscript backend: ") + e.what());
  }
  return 1;
}

// Inputs in the order forward() takes them.
std::vector<const LatheTensor*> Order(const Instance& inst, const LatheTensor* inputs, uint32_t n) {
  std::vector<const LatheTensor*> ordered;
  for (uint32_t i = 0; i < n; ++i) ordered.push_back(&inputs[i]);
  if (inst.arg_names.size() != n) return ordered;
  std::vector<const LatheTensor*> by_name;
  for (const auto& a : inst.arg_names) {
    for (uint32_t i = 0; i < n; ++i) {
      if (a == inputs[i].name) by_name.push_back(&inputs[i]);
    }
  }
  return by_name.size() == n ? by_name : ordered;
}

bool Emit(const std::string& name, const at::Tensor& value, const LatheOutputSink* sink,
          LatheError* err) {
  at::Tensor t = value.to(torch::kCPU).contiguous();
  int32_t dt = LatheType(t.scalar_type());
  if (dt == LATHE_TYPE_INVALID) {
    SetError(err, LATHE_ERR_UNSUPPORTED,
             "output '" + name + "' has dtype " + std::string(c10::toString(t.scalar_type())) +
                 ", which has no KServe v2 datatype");
    return false;
  }
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
  void* buf = sink->alloc(sink->ctx, name.c_str(), dt, static_cast<int32_t>(shape.size()),
                          shape.data(), bytes);
  if (buf == nullptr) {
    SetError(err, LATHE_ERR_INTERNAL, "output '" + name + "' was refused by the server");
    return false;
  }
  if (bytes > 0) std::memcpy(buf, t.data_ptr(), bytes);
  return true;
}

std::string OutName(const Instance& inst, size_t i) {
  return i < inst.output_names.size() ? inst.output_names[i] : "output__" + std::to_string(i);
}

// The error itself out of what forward() threw. The TorchScript interpreter
// writes "The following operation failed...", the traceback of the
// serialized code and of the original source (with its file paths), then
// "RuntimeError: <the error>"; a plain c10::Error starts with the error.
std::string ErrorLine(const std::string& what) {
  // "RuntimeError: text" -> "text"; "" for any other line.
  auto raised = [](const std::string& l) -> std::string {
    size_t start = l.find_first_not_of(' ');
    size_t colon = l.find(": ");
    if (start == std::string::npos || colon == std::string::npos || colon <= start) return "";
    std::string name = l.substr(start, colon - start);
    for (char c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return "";
    }
    auto ends = [&](std::string_view suffix) {
      return name.size() >= suffix.size() &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    return ends("Error") || ends("Exception") ? l.substr(colon + 2) : "";
  };
  std::vector<std::string> lines;
  std::istringstream in(what);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    std::string text = raised(*it);
    if (!text.empty()) return text;
  }
  for (const auto& l : lines) {
    if (!l.empty() && l.find("failed in the TorchScript interpreter") == std::string::npos)
      return l;
  }
  return "failed without a message";
}

// Shape, size and dtype errors of an operation given the request's tensors:
// the request does not fit the model.
bool IsInputMismatch(const std::string& error) {
  static const char* const kWords[] = {"shape",       "size",     "dimension", "dtype",
                                       "scalar type", "argument", "mat1",      "mat2",
                                       "channels",    "input",    "ndim",      "rank"};
  std::string lower = error;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* w : kWords) {
    if (lower.find(w) != std::string::npos) return true;
  }
  return false;
}

// Per the ABI, the first line of the message is what a client sees: the
// error alone, never the traceback or a source path. The whole text follows
// for the server's log.
void FailForward(LatheError* err, const std::string& what) {
  std::string line = ErrorLine(what);
  if (line.find("File \"") != std::string::npos || line.find(".py") != std::string::npos) {
    line = "the model's forward() failed on these inputs";
  }
  int code = IsInputMismatch(line) ? LATHE_ERR_INVALID_ARGUMENT : LATHE_ERR_INTERNAL;
  SetError(err, code, "forward(): " + line.substr(0, 500) + "\n" + what);
}

int Run(Instance& inst, const LatheTensor* inputs, uint32_t n, const LatheOutputSink* sink,
        LatheError* err) {
  try {
    c10::InferenceMode guard;
    if (inst.threads > 0 && at::get_num_threads() != inst.threads)
      at::set_num_threads(inst.threads);
    std::vector<torch::jit::IValue> args;
    for (const LatheTensor* t : Order(inst, inputs, n)) {
      c10::ScalarType st;
      if (!TorchType(t->datatype, st)) {
        SetError(err, LATHE_ERR_INVALID_ARGUMENT,
                 std::string("input '") + t->name +
                     "': this datatype has no torch dtype (BYTES, UINT16/32/64)");
        return 1;
      }
      at::Tensor x =
          torch::from_blob(const_cast<void*>(t->data), at::IntArrayRef(t->shape, t->rank),
                           torch::TensorOptions().dtype(st));
      args.emplace_back(inst.device.is_cpu() ? x : x.to(inst.device));
    }
    torch::jit::IValue result = inst.module.forward(args);
    if (sink == nullptr) return 0;  // warm-up
    if (result.isTensor()) return Emit(OutName(inst, 0), result.toTensor(), sink, err) ? 0 : 1;
    if (result.isTuple() || result.isList()) {
      std::vector<torch::jit::IValue> items;
      if (result.isTuple()) {
        items = result.toTupleRef().elements().vec();
      } else {
        items = result.toList().vec();
      }
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].isTensor()) {
          SetError(err, LATHE_ERR_UNSUPPORTED,
                   "forward() returned a non-tensor at position " + std::to_string(i));
          return 1;
        }
        if (!Emit(OutName(inst, i), items[i].toTensor(), sink, err)) return 1;
      }
      return 0;
    }
    if (result.isGenericDict()) {
      for (const auto& kv : result.toGenericDict()) {
        if (!kv.key().isString() || !kv.value().isTensor()) {
          SetError(err, LATHE_ERR_UNSUPPORTED,
                   "forward() returned a dict that is not str -> Tensor");
          return 1;
        }
        std::string name = kv.key().toStringRef();
        bool wanted = inst.output_names.empty();
        for (const auto& o : inst.output_names) wanted = wanted || o == name;
        if (wanted && !Emit(name, kv.value().toTensor(), sink, err)) return 1;
      }
      return 0;
    }
    SetError(err, LATHE_ERR_UNSUPPORTED,
             "forward() returned " + result.tagKind() +
                 "; return a Tensor, a tuple/list of Tensors or a dict str -> Tensor");
    return 1;
  } catch (const c10::Error& e) {
    FailForward(err, Short(e));
  } catch (const std::exception& e) {
    // An operation that fails inside the TorchScript interpreter comes out
    // as std::runtime_error, its traceback first.
    FailForward(err, e.what());
  }
  return 1;
}

int Execute(void* handle, const LatheTensor* inputs, uint32_t n, const LatheOutputSink* sink,
            LatheError* err) {
  return Run(*static_cast<Instance*>(handle), inputs, n, sink, err);
}

int Warmup(void* handle, const LatheTensor* inputs, uint32_t n, LatheError* err) {
  for (int i = 0; i < kWarmupRuns; ++i) {
    if (Run(*static_cast<Instance*>(handle), inputs, n, nullptr, err) != 0) return 1;
  }
  return 0;
}

int Describe(void* handle, char* out, uint64_t capacity, LatheError* err) {
  auto* inst = static_cast<Instance*>(handle);
  json in = json::array(), outs = json::array();
  for (const auto& a : inst->arg_names)
    in.push_back({{"name", a}, {"datatype", ""}, {"dims", nullptr}});
  for (size_t i = 0; i < inst->output_count; ++i)
    outs.push_back({{"name", OutName(*inst, i)}, {"datatype", ""}, {"dims", nullptr}});
  std::string s = json{{"inputs", in}, {"outputs", outs}}.dump();
  if (s.size() + 1 > capacity) {
    SetError(err, LATHE_ERR_INTERNAL, "description too long");
    return 1;
  }
  std::memcpy(out, s.c_str(), s.size() + 1);
  return 0;
}

void Unload(void* handle) {
  try {
    delete static_cast<Instance*>(handle);
  } catch (...) {
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int lathe_backend_init(uint32_t host_api_version,
                                                                         LatheBackendApi* api,
                                                                         LatheError* err) {
  api->api_version = LATHE_BACKEND_API_VERSION;
  if (host_api_version != LATHE_BACKEND_API_VERSION || api->struct_size < sizeof(LatheBackendApi)) {
    SetError(err, LATHE_ERR_UNSUPPORTED, "the torchscript backend implements API version 1");
    return 1;
  }
  api->name = "torchscript";
  api->runtime_version = "libtorch " TORCH_VERSION;
  api->load = Load;
  api->execute = Execute;
  api->unload = Unload;
  api->warmup = Warmup;
  api->describe = Describe;
  return 0;
}
