#include "lathe/doctor/probes.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <thread>

#include "lathe/common/json.h"

namespace lathe::doctor {
namespace {

constexpr const char* kSystemPython = "/usr/bin/python3";
// Where CUDA toolkits live when nvcc is not on PATH.
constexpr const char* kToolkitDirs[] = {"/usr/local/cuda/bin", "/usr/lib/nvidia-cuda-toolkit/bin"};
constexpr const char* kCudartDirs[] = {"/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu",
                                       "/usr/lib/aarch64-linux-gnu"};

std::vector<std::string> Pythons(const SystemView& view) {
  std::vector<std::string> out, real;
  for (std::string cand : {std::string(kSystemPython), std::string("python3")}) {
    auto exe = view.FindExecutable(cand);
    if (!exe) continue;
    std::string r = view.RealPath(*exe);
    if (std::find(real.begin(), real.end(), r) != real.end()) continue;
    real.push_back(r);
    out.push_back(*exe);
  }
  return out;
}

// `p` from the probe's command: its output parsed, or why it did not run
// (false then).
bool ProbeRan(const Result<CommandOutput>& r, TorchProbe& p) {
  if (!r.ok()) {
    p.state =
        r.status().code() == Code::kDeadlineExceeded ? ProbeState::kTimedOut : ProbeState::kFailed;
    p.error = r.status().message();
    return false;
  }
  ParseTorchProbeOutput(r->out, p);
  return true;
}

TorchProbe ProbeTorch(const SystemView& view, const std::string& python, int64_t timeout_ms) {
  TorchProbe p;
  p.python = python;
  auto r = view.Run({python, "-c", std::string(TorchProbeScript())}, timeout_ms);
  if (!ProbeRan(r, p)) return p;
  if (p.state == ProbeState::kFailed && !r->err.empty()) p.error += ": " + r->err.substr(0, 300);
  return p;
}

// The torch probe in one of the user's images, as a run through the daemon:
// with a GPU where the machine has one, so that CUDA is tried in the image.
TorchProbe ProbeTorchInImage(const SystemView& view, const std::string& image, int64_t timeout_ms) {
  TorchProbe p;
  p.python = "python3 (image " + image + ")";
  auto inv = view.SampleGpus();
  const int gpus = inv.ok() && !inv->gpus.empty() ? 1 : 0;
  auto r =
      view.RunInImage(image, {"python3", "-c", std::string(TorchProbeScript())}, gpus, timeout_ms);
  if (!ProbeRan(r, p)) return p;
  if (p.state == ProbeState::kFailed) {
    std::string tail = r->out.size() > 300 ? r->out.substr(r->out.size() - 300) : r->out;
    while (!tail.empty() && tail.back() == '\n') tail.pop_back();
    p.error = fmt::format("exit status {}: {}", r->exit_code, tail);
  }
  return p;
}

std::optional<std::string> FindNvcc(const SystemView& view) {
  if (auto n = view.FindExecutable("nvcc")) return n;
  for (const char* dir : kToolkitDirs) {
    if (auto n = view.FindExecutable(std::string(dir) + "/nvcc")) return n;
  }
  return std::nullopt;
}

// libcudart.so.<version> in the usual places, when there is no nvcc.
bool FindCudart(const SystemView& view, ToolkitProbe& t) {
  for (const char* dir : kCudartDirs) {
    auto names = view.ListDir(dir);
    if (!names.ok()) continue;
    for (const auto& n : *names) {
      std::string v = CudartVersionFromName(n);
      if (v.empty()) continue;
      t.path = std::string(dir) + "/" + n;
      t.version = v;
      return true;
    }
  }
  return false;
}

ToolkitProbe ProbeToolkit(const SystemView& view, int64_t timeout_ms) {
  ToolkitProbe t;
  t.state = ProbeState::kDone;
  auto nvcc = FindNvcc(view);
  if (!nvcc) {
    FindCudart(view, t);
    return t;
  }
  t.path = *nvcc;
  auto r = view.Run({*nvcc, "--version"}, timeout_ms);
  if (!r.ok()) {
    t.state =
        r.status().code() == Code::kDeadlineExceeded ? ProbeState::kTimedOut : ProbeState::kFailed;
    t.error = r.status().message();
    return t;
  }
  t.version = ParseNvccVersion(r->out);
  if (t.version.empty()) {
    t.state = ProbeState::kFailed;
    t.error = "no version in `nvcc --version` output";
  }
  return t;
}

DnsProbe ProbeDns(const SystemView& view, const std::string& name, int64_t timeout_ms) {
  DnsProbe d;
  d.name = name;
  // getent runs the system's resolver (NSS), as pip and curl would, and can be killed.
  auto r = view.Run({"getent", "ahosts", name}, timeout_ms);
  if (!r.ok()) {
    d.state =
        r.status().code() == Code::kDeadlineExceeded ? ProbeState::kTimedOut : ProbeState::kFailed;
    d.error = r.status().message();
    return d;
  }
  d.state = ProbeState::kDone;
  size_t sp = r->out.find_first_of(" \t\n");
  if (r->exit_code == 0 && sp != std::string::npos && sp > 0) {
    d.address = r->out.substr(0, sp);
  } else {
    d.error = r->exit_code == 2
                  ? "name not found"
                  : "lookup failed (getent exit " + std::to_string(r->exit_code) + ")";
  }
  return d;
}

std::vector<std::string> StringList(const Json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key) || !j[key].is_array()) return out;
  for (const auto& v : j[key]) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace

std::string_view TorchProbeScript() {
  return R"PY(import json, sys, warnings
r = {}
try:
    import torch
except Exception as e:
    print(json.dumps({"importable": False, "error": "%s: %s" % (type(e).__name__, e)}))
    sys.exit(0)
r["importable"] = True
r["version"] = str(torch.__version__)
r["cuda"] = torch.version.cuda or ""
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    try:
        r["cuda_available"] = bool(torch.cuda.is_available())
    except Exception as e:
        r["cuda_available"] = False
        w.append(e)
    r["cuda_error"] = "; ".join(str(getattr(x, "message", x)).strip() for x in w)[:500]
r["arch_list"] = torch.cuda.get_arch_list() if r["cuda"] else []
caps = []
if r["cuda_available"]:
    for i in range(torch.cuda.device_count()):
        caps.append("%d.%d" % torch.cuda.get_device_capability(i))
r["capabilities"] = caps
print(json.dumps(r))
)PY";
}

void ParseTorchProbeOutput(std::string_view out, TorchProbe& p) {
  size_t brace = out.rfind("\n{");
  std::string_view last = brace == std::string_view::npos ? out : out.substr(brace + 1);
  auto j = ParseJson(last);
  if (!j.ok() || !j->is_object()) {
    p.state = ProbeState::kFailed;
    p.error = "unexpected output from the torch probe";
    return;
  }
  p.state = ProbeState::kDone;
  p.importable = j->value("importable", false);
  p.error = j->value("error", "");
  p.version = j->value("version", "");
  p.cuda = j->value("cuda", "");
  p.cuda_available = j->value("cuda_available", false);
  p.cuda_error = j->value("cuda_error", "");
  p.arch_list = StringList(*j, "arch_list");
  p.capabilities = StringList(*j, "capabilities");
}

std::string ParseNvccVersion(std::string_view out) {
  std::string v;
  if (RE2::PartialMatch(re2::StringPiece(out.data(), out.size()), R"(release (\d+\.\d+))", &v)) {
    return v;
  }
  return "";
}

std::string CudartVersionFromName(std::string_view file_name) {
  std::string v;
  if (RE2::FullMatch(re2::StringPiece(file_name.data(), file_name.size()),
                     R"(libcudart\.so\.(\d+\.\d+)(\.\d+)*)", &v)) {
    return v;
  }
  return "";
}

// `lathe snap fsck --json` in a child, so a large store cannot hold the
// doctor past its timeout.
StoreProbe ProbeStore(const SystemView& view, int64_t timeout_ms) {
  StoreProbe p;
  p.path = view.StoreDir();
  if (p.path.empty()) {
    p.unreadable = view.UnreadableStoreDir();
    p.state = ProbeState::kDone;
    return p;
  }
  auto r = view.Run({view.SelfExe(), "snap", "--store", p.path, "fsck", "--json"}, timeout_ms);
  if (!r.ok()) {
    p.state =
        r.status().code() == Code::kDeadlineExceeded ? ProbeState::kTimedOut : ProbeState::kFailed;
    p.error = r.status().message();
    return p;
  }
  auto j = ParseJson(r->out);
  if (!j.ok() || !j->is_object() || !j->contains("ok")) {
    p.state = ProbeState::kFailed;
    p.error = r->err.empty() ? "unexpected output from lathe snap fsck" : r->err.substr(0, 300);
    return p;
  }
  p.state = ProbeState::kDone;
  p.snapshots = j->value("snapshots", uint64_t{0});
  p.packs = j->value("packs", uint64_t{0});
  p.chunks = j->value("chunks", uint64_t{0});
  if (j->contains("problems") && (*j)["problems"].is_array()) {
    const Json& probs = (*j)["problems"];
    p.problems = probs.size();
    if (!probs.empty()) {
      const Json& f = probs[0];
      p.first_problem =
          f.value("file", "") + (f.value("file", "").empty() ? "" : ": ") + f.value("what", "");
    }
  }
  return p;
}

Facts GatherFacts(const SystemView& view, const ProbeOptions& o) {
  Facts f;
  f.torch_timeout_ms = o.torch_timeout_ms;
  std::vector<std::thread> threads;
  if (o.gpu) {
    f.gpus_sampled = true;
    threads.emplace_back([&] { f.gpus = view.SampleGpus(); });
    threads.emplace_back([&] { f.toolkit = ProbeToolkit(view, o.nvcc_timeout_ms); });
    if (o.fast) {
      f.torch_skipped_fast = true;
    } else if (!o.image.empty()) {
      f.torch.resize(1);
      threads.emplace_back(
          [&] { f.torch[0] = ProbeTorchInImage(view, o.image, o.image_timeout_ms); });
    } else {
      std::vector<std::string> pythons = Pythons(view);
      f.torch.resize(pythons.size());
      for (size_t i = 0; i < pythons.size(); ++i) {
        threads.emplace_back(
            [&, i, py = pythons[i]] { f.torch[i] = ProbeTorch(view, py, o.torch_timeout_ms); });
      }
    }
  }
  f.store_timeout_ms = o.store_timeout_ms;
  if (o.lathe) {
    threads.emplace_back([&] {
      Status st = view.DaemonStatus(&f.daemon.where);
      f.daemon.state = ProbeState::kDone;
      f.daemon.up = st.ok();
      f.daemon.reason = st.message();
      if (!f.daemon.up || o.fast) return;
      auto c = view.CaptureRoundTrip(o.capture_timeout_ms);
      f.capture.state = c.ok() ? ProbeState::kDone : ProbeState::kFailed;
      if (c.ok())
        f.capture.result = *c;
      else
        f.capture.error = c.status().message();
    });
    if (!o.fast) threads.emplace_back([&] { f.store = ProbeStore(view, o.store_timeout_ms); });
  }
  f.cluster = o.cluster_options;
  if (o.cluster && o.fast) f.cluster_skipped_fast = true;
  if (o.cluster && !o.fast && !o.cluster_options.pools.empty()) {
    f.cluster_probed = true;
    threads.emplace_back([&] { f.clusters = ProbeClusters(view, o.cluster_options); });
  }
  if (o.network && !o.fast) {
    threads.emplace_back([&] { f.dns = ProbeDns(view, o.dns_name, o.dns_timeout_ms); });
  }
  for (auto& t : threads) t.join();
  return f;
}

}  // namespace lathe::doctor
