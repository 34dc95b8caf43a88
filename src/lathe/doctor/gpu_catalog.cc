#include "lathe/doctor/gpu_catalog.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "lathe/common/embedded.h"
#include "lathe/common/i18n.h"
#include "lathe/common/units.h"
#include "lathe/os/files.h"

namespace lathe::doctor {
namespace {

Status Bad(std::string_view file, std::string_view id, std::string_view field,
           std::string_view why) {
  return Status::InvalidArgument(
      fmt::format("{}: entry '{}' field '{}': {}", file, id, field, why));
}

std::string Plain(const DataEntry& e, const std::string& k) {
  auto it = e.plain.find(k);
  return it == e.plain.end() ? "" : it->second;
}

Result<double> Number(const DataEntry& e, const std::string& k, std::string_view file) {
  std::string v = Plain(e, k);
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || d < 0)
    return Bad(file, e.id, k, "must be a non-negative number");
  return d;
}

Result<GpuModel> ModelFrom(const DataEntry& e, std::string_view file) {
  GpuModel m;
  m.id = e.id;
  m.name = Plain(e, "name");
  if (m.name.empty()) return Bad(file, e.id, "name", "required");
  auto mem = ParseBytes(Plain(e, "memory"));
  if (!mem.ok() || *mem == 0) return Bad(file, e.id, "memory", "must be a size such as 80GiB");
  m.memory_bytes = *mem;
  ASSIGN_OR_RETURN(m.bf16_tflops, Number(e, "bf16_tflops", file));
  if (m.bf16_tflops <= 0) return Bad(file, e.id, "bf16_tflops", "must be positive");
  if (!Plain(e, "price_usd_hour").empty()) {
    ASSIGN_OR_RETURN(double price, Number(e, "price_usd_hour", file));
    m.price_usd_hour = price;
  }
  m.match = Plain(e, "match");
  if (!m.match.empty() && !RE2(m.match, RE2::Quiet).ok()) {
    return Bad(file, e.id, "match", "does not compile");
  }
  return m;
}

GpuFit Fit(const MemoryPlan& plan, const PlanInput& in, std::string name, uint64_t memory,
           const GpuModel* model, double mfu) {
  GpuFit f;
  f.name = std::move(name);
  f.memory_bytes = memory;
  f.fits = plan.total <= static_cast<double>(memory);
  if (model == nullptr) return f;
  double flops = mfu * model->bf16_tflops * 1e12;
  f.tokens_per_s = flops / (FlopsPerTokenPerParam(in) * static_cast<double>(plan.params));
  if (model->price_usd_hour && *f.tokens_per_s > 0) {
    f.usd_per_mtok = *model->price_usd_hour / 3600.0 / *f.tokens_per_s * 1e6;
  }
  return f;
}

}  // namespace

Result<std::vector<GpuModel>> ParseGpuCatalog(std::string_view yaml, std::string_view file_name) {
  ASSIGN_OR_RETURN(std::vector<DataEntry> data, ParseDataFile(yaml, file_name));
  std::vector<GpuModel> out;
  for (const auto& e : data) {
    ASSIGN_OR_RETURN(GpuModel m, ModelFrom(e, file_name));
    out.push_back(std::move(m));
  }
  return out;
}

const std::vector<GpuModel>& DefaultGpuCatalog() {
  static const auto* catalog = [] {
    auto r = ParseGpuCatalog(FindEmbedded("gpu_catalog.yaml"), "data/gpu_catalog.yaml");
    if (!r.ok()) {
      std::fprintf(stderr, "lathe: broken GPU catalogue: %s\n", r.status().message().c_str());
      std::abort();
    }
    return new std::vector<GpuModel>(std::move(r).value());
  }();
  return *catalog;
}

std::vector<std::string> GpuCatalogOverridePaths(GetenvFn getenv_fn) {
  std::vector<std::string> paths = {"/etc/lathe/gpu_catalog.yaml"};
  const char* xdg = getenv_fn("XDG_CONFIG_HOME");
  const char* home = getenv_fn("HOME");
  if (xdg != nullptr && *xdg == '/') {  // XDG: a relative value is ignored
    paths.push_back(std::string(xdg) + "/lathe/gpu_catalog.yaml");
  } else if (home != nullptr && *home != '\0') {
    paths.push_back(std::string(home) + "/.config/lathe/gpu_catalog.yaml");
  }
  return paths;
}

Status MergeGpuCatalog(std::vector<GpuModel>& catalog, std::string_view yaml,
                       std::string_view file_name) {
  ASSIGN_OR_RETURN(std::vector<GpuModel> models, ParseGpuCatalog(yaml, file_name));
  for (auto& m : models) {
    auto it = std::find_if(catalog.begin(), catalog.end(),
                           [&](const GpuModel& c) { return c.id == m.id; });
    if (it != catalog.end()) {
      *it = std::move(m);
    } else {
      catalog.push_back(std::move(m));
    }
  }
  return Status::OK();
}

Result<std::vector<GpuModel>> LoadGpuCatalog(const std::vector<std::string>& paths,
                                             std::vector<std::string>* read) {
  std::vector<GpuModel> catalog = DefaultGpuCatalog();
  for (const auto& path : paths) {
    Result<std::string> text = os::ReadFile(path);
    if (!text.ok() && text.status().code() == Code::kNotFound) continue;
    if (!text.ok()) return text.status();
    RETURN_IF_ERROR(MergeGpuCatalog(catalog, *text, path));
    if (read != nullptr) read->push_back(path);
  }
  return catalog;
}

Status ApplyPrices(std::vector<GpuModel>& models, std::string_view yaml, std::string_view file) {
  ASSIGN_OR_RETURN(std::vector<DataEntry> data, ParseDataFile(yaml, file));
  for (const auto& e : data) {
    auto it =
        std::find_if(models.begin(), models.end(), [&](const GpuModel& m) { return m.id == e.id; });
    if (it == models.end())
      return Bad(file, e.id, "id", "no GPU model with this id in the catalogue");
    ASSIGN_OR_RETURN(double price, Number(e, "price_usd_hour", file));
    it->price_usd_hour = price;
  }
  return Status::OK();
}

const GpuModel* MatchGpuModel(const std::vector<GpuModel>& catalog, const std::string& name) {
  for (const auto& m : catalog) {
    if (!m.match.empty() && RE2::PartialMatch(name, RE2(m.match, RE2::Quiet))) return &m;
  }
  return nullptr;
}

double FlopsPerTokenPerParam(const PlanInput& in) {
  if (in.precision == Precision::kInt8) return 2;
  return in.checkpointing ? 8 : 6;
}

std::vector<GpuFit> FitGpus(const MemoryPlan& plan, const PlanInput& in,
                            const std::vector<GpuModel>& catalog, const gpu::Inventory* local,
                            double mfu) {
  std::vector<GpuFit> out;
  if (local != nullptr) {
    for (const auto& g : local->gpus) {
      if (!g.memory_total_bytes) continue;
      GpuFit f = Fit(plan, in, g.name, *g.memory_total_bytes, MatchGpuModel(catalog, g.name), mfu);
      f.name = fmt::format("GPU {}: {}", g.index, g.name);
      f.local = true;
      out.push_back(std::move(f));
    }
  }
  for (const auto& m : catalog) out.push_back(Fit(plan, in, m.name, m.memory_bytes, &m, mfu));
  return out;
}

}  // namespace lathe::doctor
