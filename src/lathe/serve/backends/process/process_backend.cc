// The process backend: a user's handler (handler.py) run by a worker process
// per instance, spoken to over a unix socket with length-prefixed frames (the
// protocol is described in lathe_handler.py, the Python side).
//
// A worker that dies fails the batch it was running with UNAVAILABLE (503) and
// is started again before the next batch. Its stderr (and stdout) go to the
// server's stderr.
//
// parameters (config.yaml), all optional:
//   python: /usr/bin/python3      the interpreter (Debian's sees Debian's modules)
//   load_timeout: 120             seconds load() may take
//   execute_timeout: 0            seconds a batch may take before the worker is
//                                 killed and restarted (0: wait forever; the
//                                 health probe reports a hang)
//   env: {NAME: value}            extra environment for the worker
#include <nlohmann/json.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "lathe/serve/backend_api.h"

extern char** environ;

namespace {

using nlohmann::json;
constexpr uint32_t kMaxFrameBytes = 0xFFFFFFF0u;
constexpr int kKillGraceMs = 3000;

const char* kTypeNames[] = {"INVALID", "BOOL", "UINT8", "UINT16", "UINT32",
                            "UINT64",  "INT8", "INT16", "INT32",  "INT64",
                            "FP16",    "FP32", "FP64",  "BYTES",  "BF16"};

int TypeFromName(const std::string& n) {
  for (int i = 1; i < 15; ++i) {
    if (n == kTypeNames[i]) return i;
  }
  return 0;
}

void SetError(LatheError* err, int code, const std::string& msg) {
  err->code = code;
  std::snprintf(err->message, sizeof err->message, "%s", msg.c_str());
}

std::string RunnerPath() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&SetError), &info) == 0 || info.dli_fname == nullptr)
    return "lathe_handler.py";
  std::string so = info.dli_fname;
  size_t slash = so.rfind('/');
  return (slash == std::string::npos ? std::string(".") : so.substr(0, slash)) +
         "/lathe_handler.py";
}

// The physical GPU id of visible device `index` (the entry of our
// CUDA_VISIBLE_DEVICES, or the index itself when it is unset).
std::string PhysicalGpu(int index) {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  if (v == nullptr) return std::to_string(index);
  std::string s = v;
  int k = 0;
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    if (k++ == index) return s.substr(i, j - i);
    i = j + 1;
  }
  return std::to_string(index);
}

struct Instance {
  std::string name;
  std::vector<std::string> argv, env;
  int64_t load_timeout_ms = 120000;
  int64_t execute_timeout_ms = 0;
  pid_t pid = -1;
  int fd = -1;
};

// ---- socket I/O with an optional deadline (-1: none) ----

bool WaitReadable(int fd, int64_t deadline_ms) {
  for (;;) {
    int timeout = -1;
    if (deadline_ms >= 0) {
      int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count();
      if (now >= deadline_ms) return false;
      timeout = static_cast<int>(deadline_ms - now);
    }
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, timeout);
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

bool ReadAll(int fd, char* buf, size_t n, int64_t deadline_ms) {
  while (n > 0) {
    if (!WaitReadable(fd, deadline_ms)) return false;
    ssize_t k = ::recv(fd, buf, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    buf += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool WriteAll(int fd, const char* buf, size_t n) {
  while (n > 0) {
    ssize_t k = ::send(fd, buf, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    buf += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

uint32_t Le32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return u[0] | (u[1] << 8) | (u[2] << 16) | (static_cast<uint32_t>(u[3]) << 24);
}

void PutLe32(std::string& s, uint32_t v) {
  char b[4] = {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
               static_cast<char>(v >> 24)};
  s.append(b, 4);
}

// Reads one frame: header JSON and the bytes after it.
bool ReadFrame(int fd, int64_t deadline_ms, json& header, std::string& data) {
  char len[4];
  if (!ReadAll(fd, len, 4, deadline_ms)) return false;
  uint32_t n = Le32(len);
  if (n < 4 || n > kMaxFrameBytes) return false;
  std::string payload(n, '\0');
  if (!ReadAll(fd, payload.data(), n, deadline_ms)) return false;
  uint32_t hlen = Le32(payload.data());
  if (hlen > n - 4) return false;
  header = json::parse(payload.begin() + 4, payload.begin() + 4 + hlen, nullptr, false);
  if (header.is_discarded()) return false;
  data.assign(payload, 4 + hlen, std::string::npos);
  return true;
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status));
  return "stopped";
}

// Stops the worker (closing its socket ends it; then SIGKILL) and says how it ended.
std::string Reap(Instance& inst, bool kill_now) {
  if (inst.fd >= 0) ::close(inst.fd);
  inst.fd = -1;
  if (inst.pid <= 0) return "";
  if (kill_now) ::kill(inst.pid, SIGKILL);
  int status = 0;
  for (int waited = 0;; waited += 10) {
    pid_t r = ::waitpid(inst.pid, &status, WNOHANG);
    if (r == inst.pid || (r < 0 && errno != EINTR)) break;
    if (waited >= kKillGraceMs) {
      ::kill(inst.pid, SIGKILL);
      ::waitpid(inst.pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string how = "worker " + std::to_string(inst.pid) + " " + DescribeExit(status);
  inst.pid = -1;
  return how;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Starts the worker and waits for its "ready" frame.
bool Spawn(Instance& inst, LatheError* err) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    SetError(err, LATHE_ERR_INTERNAL, std::string("socketpair: ") + std::strerror(errno));
    return false;
  }
  if (sv[1] == 3) {  // dup2(3, 3) would keep close-on-exec: move it out of the way
    int moved = ::fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    ::close(sv[1]);
    sv[1] = moved;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, 2, 1);      // prints go to the log
  posix_spawn_file_actions_adddup2(&fa, sv[1], 3);  // the protocol socket (dup2 clears CLOEXEC)
  std::vector<char*> argv, envp;
  for (auto& a : inst.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : inst.env) envp.push_back(e.data());
  envp.push_back(nullptr);
  // The server blocks SIGTERM/SIGINT and ignores SIGPIPE; a worker starts clean,
  // in its own process group so a terminal's Ctrl-C reaches only the server,
  // which drains the workers' work before closing their sockets.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    SetError(err, rc == ENOENT ? LATHE_ERR_NOT_FOUND : LATHE_ERR_INTERNAL,
             "cannot start " + inst.argv[0] + ": " + std::strerror(rc));
    return false;
  }
  inst.pid = pid;
  inst.fd = sv[0];
  json header;
  std::string data;
  if (!ReadFrame(inst.fd, NowMs() + inst.load_timeout_ms, header, data)) {
    std::string how = Reap(inst, true);
    SetError(err, LATHE_ERR_UNAVAILABLE,
             inst.name + ": the handler did not become ready within " +
                 std::to_string(inst.load_timeout_ms / 1000) + " s (" + how +
                 "; see its traceback in the log above)");
    return false;
  }
  if (!header.value("ok", false)) {
    std::string msg = header.value("error", std::string("unknown error"));
    Reap(inst, false);
    SetError(err, LATHE_ERR_INVALID_ARGUMENT, inst.name + ": the handler failed to load: " + msg);
    return false;
  }
  return true;
}

int Load(const LatheInstanceSpec* spec, void** out, LatheError* err) {
  try {
    json cfg = json::parse(spec->config_json);
    json params = cfg.value("parameters", json::object());
    auto inst = std::make_unique<Instance>();
    inst->name = std::string(spec->model_name) + " v" + std::to_string(spec->model_version) +
                 " instance " + std::to_string(spec->instance_index);
    if (::access(spec->model_file, R_OK) != 0) {
      SetError(
          err, errno == EACCES ? LATHE_ERR_PERMISSION_DENIED : LATHE_ERR_NOT_FOUND,
          std::string("handler ") + spec->model_file + ": " + std::strerror(errno) +
              " (the process backend runs <version dir>/handler.py, or default_model_filename)");
      return 1;
    }
    std::string python = params.value("python", std::string("/usr/bin/python3"));
    std::string runner = params.value("runner", RunnerPath());
    inst->argv = {python, "-u", runner};
    inst->load_timeout_ms = static_cast<int64_t>(params.value("load_timeout", 120.0) * 1000);
    inst->execute_timeout_ms = static_cast<int64_t>(params.value("execute_timeout", 0.0) * 1000);
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv = *e;
      if (kv.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0) continue;
      inst->env.push_back(kv);
    }
    std::string cuda =
        std::strcmp(spec->device_kind, "cuda") == 0 ? PhysicalGpu(spec->device_index) : "";
    inst->env.push_back("CUDA_VISIBLE_DEVICES=" + cuda);
    inst->env.push_back("LATHE_HANDLER_FD=3");
    inst->env.push_back("LATHE_SERVER_PID=" + std::to_string(::getpid()));
    inst->env.push_back(std::string("LATHE_HANDLER_FILE=") + spec->model_file);
    inst->env.push_back(std::string("LATHE_MODEL_DIR=") + spec->version_dir);
    inst->env.push_back(std::string("LATHE_MODEL_NAME=") + spec->model_name);
    inst->env.push_back("LATHE_MODEL_VERSION=" + std::to_string(spec->model_version));
    inst->env.push_back("LATHE_INSTANCE=" + std::to_string(spec->instance_index));
    inst->env.push_back("LATHE_DEVICE=" + std::string(spec->device_kind) +
                        (spec->device_index >= 0 ? ":" + std::to_string(spec->device_index) : ""));
    inst->env.push_back("LATHE_THREADS=" + std::to_string(spec->threads));
    if (spec->threads > 0) inst->env.push_back("OMP_NUM_THREADS=" + std::to_string(spec->threads));
    if (params.contains("env") && params["env"].is_object()) {
      for (auto it = params["env"].begin(); it != params["env"].end(); ++it) {
        inst->env.push_back(it.key() + "=" +
                            (it->is_string() ? it->get<std::string>() : it->dump()));
      }
    }
    if (!Spawn(*inst, err)) return 1;
    *out = inst.release();
    return 0;
  } catch (const std::exception& e) {
    SetError(err, LATHE_ERR_INTERNAL, std::string("process backend: ") + e.what());
    return 1;
  }
}

int ExecuteOnce(Instance& inst, const LatheTensor* inputs, uint32_t n, const LatheOutputSink* sink,
                LatheError* err) {
  // 1. The request frame.
  json tensors = json::array();
  uint64_t offset = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const LatheTensor& t = inputs[i];
    int dt = (t.datatype > 0 && t.datatype < 15) ? t.datatype : 0;
    tensors.push_back({{"name", t.name},
                       {"datatype", kTypeNames[dt]},
                       {"shape", std::vector<int64_t>(t.shape, t.shape + t.rank)},
                       {"offset", offset},
                       {"size", t.byte_size}});
    offset += t.byte_size;
  }
  std::string h = json{{"op", "infer"}, {"tensors", tensors}}.dump();
  if (4 + h.size() + offset > kMaxFrameBytes) {
    SetError(err, LATHE_ERR_INVALID_ARGUMENT, "the batch is too large for one frame (4 GiB)");
    return 1;
  }
  std::string head;
  PutLe32(head, static_cast<uint32_t>(4 + h.size() + offset));
  PutLe32(head, static_cast<uint32_t>(h.size()));
  head += h;
  bool sent = WriteAll(inst.fd, head.data(), head.size());
  for (uint32_t i = 0; sent && i < n; ++i) {
    sent = WriteAll(inst.fd, static_cast<const char*>(inputs[i].data), inputs[i].byte_size);
  }
  // 2. The answer.
  json reply;
  std::string data;
  int64_t deadline = inst.execute_timeout_ms > 0 ? NowMs() + inst.execute_timeout_ms : -1;
  if (!sent || !ReadFrame(inst.fd, deadline, reply, data)) {
    bool timed_out = sent && deadline >= 0 && NowMs() >= deadline;
    std::string how = Reap(inst, true);
    SetError(
        err, LATHE_ERR_UNAVAILABLE,
        inst.name +
            (timed_out ? ": the handler took longer than execute_timeout; " : ": the handler ") +
            how + " during the batch; it is restarted for the next one");
    return 1;
  }
  if (!reply.value("ok", false)) {
    std::string code = reply.value("code", std::string("internal"));
    SetError(err, code == "invalid_argument" ? LATHE_ERR_INVALID_ARGUMENT : LATHE_ERR_INTERNAL,
             reply.value("error", std::string("the handler failed")));
    return 1;
  }
  // 3. Outputs into the host's buffers.
  for (const auto& t : reply.value("tensors", json::array())) {
    std::string name = t.value("name", "");
    std::vector<int64_t> shape = t.value("shape", std::vector<int64_t>{});
    uint64_t off = t.value("offset", uint64_t{0}), size = t.value("size", uint64_t{0});
    if (off > data.size() || size > data.size() - off) {
      SetError(err, LATHE_ERR_INTERNAL, "the handler's reply is truncated");
      return 1;
    }
    void* buf = sink->alloc(sink->ctx, name.c_str(), TypeFromName(t.value("datatype", "")),
                            static_cast<int32_t>(shape.size()), shape.data(), size);
    if (buf == nullptr) {
      SetError(err, LATHE_ERR_INTERNAL,
               "output '" + name + "' was refused (its size does not match its shape)");
      return 1;
    }
    if (size > 0) std::memcpy(buf, data.data() + off, size);
  }
  return 0;
}

int Execute(void* handle, const LatheTensor* inputs, uint32_t n, const LatheOutputSink* sink,
            LatheError* err) {
  auto& inst = *static_cast<Instance*>(handle);
  try {
    if (inst.fd < 0) {
      std::fprintf(stderr, "lathe serve: %s: starting a new worker\n", inst.name.c_str());
      if (!Spawn(inst, err)) return 1;
    }
    return ExecuteOnce(inst, inputs, n, sink, err);
  } catch (const std::exception& e) {
    SetError(err, LATHE_ERR_INTERNAL, std::string("process backend: ") + e.what());
    return 1;
  }
}

void Unload(void* handle) {
  auto* inst = static_cast<Instance*>(handle);
  Reap(*inst, false);
  delete inst;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int lathe_backend_init(uint32_t host_api_version,
                                                                         LatheBackendApi* api,
                                                                         LatheError* err) {
  api->api_version = LATHE_BACKEND_API_VERSION;
  if (host_api_version != LATHE_BACKEND_API_VERSION) {
    SetError(err, LATHE_ERR_UNSUPPORTED, "the process backend implements API version 1");
    return 1;
  }
  api->name = "process";
  api->runtime_version = "process 1";
  api->load = Load;
  api->execute = Execute;
  api->unload = Unload;
  return 0;
}
