// The host side of the backend ABI (backend_api.h): finding and opening backend
// libraries, and one loaded model instance as a C++ object.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/serve/backend_api.h"
#include "lathe/serve/tensor.h"

namespace lathe::serve {

// An opened backend library. Never closed: runtimes such as LibTorch do not
// survive dlclose, and a process opens each backend at most once.
class BackendLibrary {
 public:
  // dlopens `path` and initialises it for LATHE_BACKEND_API_VERSION.
  static Result<std::unique_ptr<BackendLibrary>> Open(const std::string& name,
                                                      const std::string& path);
  const LatheBackendApi& api() const { return api_; }
  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }

 private:
  BackendLibrary() = default;
  std::string name_, path_;
  LatheBackendApi api_{};
};

// Finds liblathe_backend_<name>.so in the search directories, in order:
// $LATHE_BACKEND_DIR (colon-separated), <dir of the lathe binary>/backends,
// <dir of the lathe binary>/../lib/lathe/backends. Opens each at most once.
// Thread-safe.
class BackendRegistry {
 public:
  explicit BackendRegistry(std::vector<std::string> search_dirs);
  static std::vector<std::string> DefaultSearchDirs();

  // NotFound naming the backend, where it looked and what is available.
  Result<const BackendLibrary*> Get(const std::string& name);
  // Names of the backends present in the search directories.
  std::vector<std::string> Available() const;
  const std::vector<std::string>& search_dirs() const { return dirs_; }

 private:
  const std::vector<std::string> dirs_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<BackendLibrary>> open_;  // guarded by mu_
};

// Status for a failed backend call. The message is the backend's, whole:
// for the server's log.
Status BackendError(const LatheError& err, const std::string& context);

inline constexpr size_t kClientErrorMaxChars = 500;
// A failed request's status as its client gets it: the first line of the
// message (a backend's summary line, backend_api.h), at most
// kClientErrorMaxChars. A catalog message passes unchanged.
Status ForClient(const Status& s);

// serve.wrong_datatype or serve.wrong_shape (`id`) for input `tensor`:
// `expected` (with `note` after it in English) was declared, `got` came.
// Args tensor, expected and got for clients; input/why (and their _zh) for
// the texts, which also carry a backend's own words (ForClient).
Status WrongInput(const std::string& id, const std::string& tensor, const std::string& expected,
                  const std::string& got, const std::string& note);

struct InstanceSpec {
  std::string model_name;
  int64_t model_version = 0;
  std::string model_dir, version_dir, model_file;
  std::string config_json;
  std::string device_kind = "cpu";  // "cpu" | "cuda"
  int device_index = -1;
  int instance_index = 0;
  int threads = 0;
  int max_batch_size = 0;
};

// One loaded instance (load in Load, unload in the destructor). Not
// thread-safe: its owner calls it from one thread at a time.
class BackendInstance {
 public:
  static Result<std::unique_ptr<BackendInstance>> Load(const BackendLibrary& lib,
                                                       const InstanceSpec& spec);
  ~BackendInstance();

  // Runs one batch. Outputs are validated (sizes match shapes).
  Result<std::vector<Tensor>> Execute(const std::vector<LatheTensor>& inputs);
  // The backend's own warm-up when it has one, else Execute.
  Status Warmup(const std::vector<LatheTensor>& inputs);
  // What the backend can tell about the model's tensors; null when it cannot.
  Json Describe();
  // Whether Execute may run on the thread that dispatched the batch (the
  // backend's optional runs_inline; false when it has none).
  bool RunsInline();

 private:
  BackendInstance(const BackendLibrary& lib, void* handle) : lib_(lib), handle_(handle) {}
  const BackendLibrary& lib_;
  void* handle_;
};

// Lends `t` to the ABI (pointers into `t`, valid while it lives).
LatheTensor ToLathe(const Tensor& t);

}  // namespace lathe::serve
