#include "lathe/serve/backend.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>

#include <fmt/format.h>

#include "lathe/common/split.h"
#include "lathe/os/files.h"
#include "lathe/os/process.h"

namespace lathe::serve {
namespace fs = std::filesystem;
namespace {

constexpr const char* kPrefix = "liblathe_backend_";
constexpr size_t kDescribeCapacity = 1 << 20;

std::string SelfDir() {
  std::string exe = os::SelfExe("");
  return exe.empty() ? "." : fs::path(exe).parent_path().string();
}

Code CodeFor(int32_t c) {
  switch (c) {
    case LATHE_ERR_INVALID_ARGUMENT:
      return Code::kInvalidArgument;
    case LATHE_ERR_NOT_FOUND:
      return Code::kNotFound;
    case LATHE_ERR_UNAVAILABLE:
      return Code::kUnavailable;
    case LATHE_ERR_PERMISSION_DENIED:
      return Code::kPermissionDenied;
    case LATHE_ERR_UNSUPPORTED:
      return Code::kFailedPrecondition;
    default:
      return Code::kInternal;
  }
}

// Collects execute's outputs in host memory.
struct OutputCollector {
  std::deque<Tensor> outputs;  // a deque: buffers handed out must not move
  std::string error;

  static void* Alloc(void* ctx, const char* name, int32_t datatype, int32_t rank,
                     const int64_t* shape, uint64_t byte_size) {
    auto* self = static_cast<OutputCollector*>(ctx);
    Tensor t;
    t.name = name != nullptr ? name : "";
    t.datatype = static_cast<DataType>(datatype);
    if (rank < 0 || rank > 64 || (rank > 0 && shape == nullptr)) {
      self->error = "output '" + t.name + "' has an invalid rank";
      return nullptr;
    }
    t.shape.assign(shape, shape + rank);
    for (const auto& o : self->outputs) {
      if (o.name == t.name) {
        self->error = "output '" + t.name + "' was produced twice";
        return nullptr;
      }
    }
    if (DataTypeName(t.datatype) == "INVALID") {
      self->error = "output '" + t.name + "' has an invalid datatype";
      return nullptr;
    }
    int64_t n = ElementCount(t.shape);
    if (n < 0 || (t.datatype != DataType::kBytes &&
                  byte_size != static_cast<uint64_t>(n) * DataTypeSize(t.datatype))) {
      self->error = fmt::format("output '{}' has {} bytes for shape {}", t.name, byte_size,
                                ShapeString(t.shape));
      return nullptr;
    }
    t.data.resize(byte_size);
    self->outputs.push_back(std::move(t));
    // A zero-size output still needs a non-NULL pointer.
    return self->outputs.back().data.empty() ? static_cast<void*>(self)
                                             : self->outputs.back().data.data();
  }
};

}  // namespace

Status BackendError(const LatheError& err, const std::string& context) {
  std::string msg(err.message, strnlen(err.message, sizeof err.message));
  if (msg.empty()) msg = "failed without a message";
  return Status(CodeFor(err.code), context.empty() ? msg : context + ": " + msg);
}

Status WrongInput(const std::string& id, const std::string& tensor, const std::string& expected,
                  const std::string& got, const std::string& note) {
  return Status::Msg(Code::kInvalidArgument, id,
                     {{"tensor", tensor},
                      {"expected", expected},
                      {"got", got},
                      {"input", "input '" + tensor + "'"},
                      {"input_zh", "输入 “" + tensor + "” "},
                      {"why", expected + note + " expected, " + got + " given"},
                      {"why_zh", "应为 " + expected + "，实际为 " + got}});
}

namespace {

// Which of the two a backend's invalid-input error is, from its words
// (LibTorch's: "expected scalar type Float but found Double", "mat1 and
// mat2 shapes cannot be multiplied", "size mismatch", "Expected 2D input"):
// without a model config only the model knows what it takes. "" when the
// words say neither.
std::string InputErrorKind(std::string_view line) {
  std::string lower(line);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* w : {"scalar type", "dtype", "datatype"}) {
    if (lower.find(w) != std::string::npos) return "serve.wrong_datatype";
  }
  for (const char* w :
       {"shape", "size mismatch", "dimension", "sizes of tensors", "must match the size"}) {
    if (lower.find(w) != std::string::npos) return "serve.wrong_shape";
  }
  return "";
}

}  // namespace

Status ForClient(const Status& s) {
  if (s.ok() || !s.msg_id().empty()) return s;
  std::string line = s.message().substr(0, s.message().find('\n'));
  if (line.size() > kClientErrorMaxChars) line = line.substr(0, kClientErrorMaxChars) + "...";
  if (s.code() == Code::kInvalidArgument) {
    if (std::string id = InputErrorKind(line); !id.empty()) {
      return Status::Msg(Code::kInvalidArgument, id,
                         {{"input", "an input"},
                          {"input_zh", "输入"},
                          {"why", "the model refused it: " + line},
                          {"why_zh", "模型拒绝了它：" + line}});
    }
  }
  return Status(s.code(), std::move(line));
}

LatheTensor ToLathe(const Tensor& t) {
  LatheTensor l;
  l.name = t.name.c_str();
  l.datatype = static_cast<int32_t>(t.datatype);
  l.rank = static_cast<int32_t>(t.shape.size());
  l.shape = t.shape.data();
  l.data = t.data.data();
  l.byte_size = t.data.size();
  return l;
}

Result<std::unique_ptr<BackendLibrary>> BackendLibrary::Open(const std::string& name,
                                                             const std::string& path) {
  // RTLD_LOCAL keeps a runtime's symbols (LibTorch's) away from other backends.
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = ::dlerror();
    return Status::Msg(Code::kFailedPrecondition, "serve.backend_open",
                       {{"backend", name}, {"path", path}, {"detail", e ? e : "?"}});
  }
  auto init = reinterpret_cast<LatheBackendInitFn>(::dlsym(h, LATHE_BACKEND_INIT_SYMBOL));
  if (init == nullptr) {
    return Status::Msg(
        Code::kFailedPrecondition, "serve.backend_open",
        {{"backend", name}, {"path", path}, {"detail", "no symbol " LATHE_BACKEND_INIT_SYMBOL}});
  }
  std::unique_ptr<BackendLibrary> lib(new BackendLibrary());
  lib->name_ = name;
  lib->path_ = path;
  lib->api_.struct_size = sizeof(LatheBackendApi);
  LatheError err{};
  if (init(LATHE_BACKEND_API_VERSION, &lib->api_, &err) != 0 ||
      lib->api_.api_version != LATHE_BACKEND_API_VERSION) {
    return Status::Msg(
        Code::kFailedPrecondition, "serve.backend_version",
        {{"backend", name},
         {"host", std::to_string(LATHE_BACKEND_API_VERSION)},
         {"version", std::to_string(lib->api_.api_version)},
         {"detail", std::string(err.message, strnlen(err.message, sizeof err.message))}});
  }
  if (lib->api_.load == nullptr || lib->api_.execute == nullptr || lib->api_.unload == nullptr) {
    return Status::Msg(
        Code::kFailedPrecondition, "serve.backend_open",
        {{"backend", name}, {"path", path}, {"detail", "a required entry point is missing"}});
  }
  return lib;
}

BackendRegistry::BackendRegistry(std::vector<std::string> search_dirs)
    : dirs_(std::move(search_dirs)) {}

std::vector<std::string> BackendRegistry::DefaultSearchDirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("LATHE_BACKEND_DIR"); env != nullptr && *env != '\0') {
    dirs = SplitNonEmpty(env, ':');
  }
  std::string self = SelfDir();
  dirs.push_back(self + "/backends");
  dirs.push_back(fs::path(self + "/../lib/lathe/backends").lexically_normal().string());
  return dirs;
}

std::vector<std::string> BackendRegistry::Available() const {
  std::vector<std::string> names;
  for (const auto& d : dirs_) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      std::string f = e.path().filename().string();
      if (f.rfind(kPrefix, 0) == 0 && f.size() > 3 && f.compare(f.size() - 3, 3, ".so") == 0) {
        std::string n = f.substr(strlen(kPrefix), f.size() - strlen(kPrefix) - 3);
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
      }
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<const BackendLibrary*> BackendRegistry::Get(const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  if (auto it = open_.find(name); it != open_.end()) return it->second.get();
  for (const auto& d : dirs_) {
    std::string path = d + "/" + kPrefix + name + ".so";
    if (!os::Exists(path)) continue;
    ASSIGN_OR_RETURN(auto lib, BackendLibrary::Open(name, path));
    const BackendLibrary* p = lib.get();
    open_[name] = std::move(lib);
    return p;
  }
  std::string where, avail;
  for (const auto& d : dirs_) where += (where.empty() ? "" : ", ") + d;
  for (const auto& n : Available()) avail += (avail.empty() ? "" : ", ") + n;
  // No backend at all: a lathe binary copied away from its backends (or a
  // build that made none); the message says where they belong.
  if (avail.empty()) {
    return Status::Msg(Code::kNotFound, "serve.backends_none",
                       {{"backend", name}, {"dirs", where}});
  }
  return Status::Msg(Code::kNotFound, "serve.backend_missing",
                     {{"backend", name}, {"dirs", where}, {"available", avail}});
}

Result<std::unique_ptr<BackendInstance>> BackendInstance::Load(const BackendLibrary& lib,
                                                               const InstanceSpec& s) {
  LatheInstanceSpec spec{};
  spec.struct_size = sizeof spec;
  spec.model_name = s.model_name.c_str();
  spec.model_version = s.model_version;
  spec.model_dir = s.model_dir.c_str();
  spec.version_dir = s.version_dir.c_str();
  spec.model_file = s.model_file.c_str();
  spec.config_json = s.config_json.c_str();
  spec.device_kind = s.device_kind.c_str();
  spec.device_index = s.device_index;
  spec.instance_index = s.instance_index;
  spec.threads = s.threads;
  spec.max_batch_size = s.max_batch_size;
  void* handle = nullptr;
  LatheError err{};
  if (lib.api().load(&spec, &handle, &err) != 0) return BackendError(err, "");
  return std::unique_ptr<BackendInstance>(new BackendInstance(lib, handle));
}

BackendInstance::~BackendInstance() { lib_.api().unload(handle_); }

Result<std::vector<Tensor>> BackendInstance::Execute(const std::vector<LatheTensor>& inputs) {
  OutputCollector c;
  LatheOutputSink sink{&c, &OutputCollector::Alloc};
  LatheError err{};
  int rc =
      lib_.api().execute(handle_, inputs.data(), static_cast<uint32_t>(inputs.size()), &sink, &err);
  if (!c.error.empty()) return Status::Internal(lib_.name() + " backend: " + c.error);
  if (rc != 0) return BackendError(err, "");
  for (const auto& t : c.outputs) {
    if (t.datatype == DataType::kBytes) RETURN_IF_ERROR(ValidateTensorData(t));
  }
  return std::vector<Tensor>(std::make_move_iterator(c.outputs.begin()),
                             std::make_move_iterator(c.outputs.end()));
}

Status BackendInstance::Warmup(const std::vector<LatheTensor>& inputs) {
  if (lib_.api().warmup == nullptr) return Execute(inputs).status();
  LatheError err{};
  if (lib_.api().warmup(handle_, inputs.data(), static_cast<uint32_t>(inputs.size()), &err) != 0) {
    return BackendError(err, "warm-up");
  }
  return Status::OK();
}

Json BackendInstance::Describe() {
  if (lib_.api().describe == nullptr) return nullptr;
  std::string buf(kDescribeCapacity, '\0');
  LatheError err{};
  if (lib_.api().describe(handle_, buf.data(), buf.size(), &err) != 0) return nullptr;
  buf.resize(strnlen(buf.data(), buf.size()));
  Json j = Json::parse(buf, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? Json(nullptr) : j;
}

bool BackendInstance::RunsInline() {
  return lib_.api().runs_inline != nullptr && lib_.api().runs_inline(handle_) != 0;
}

}  // namespace lathe::serve
