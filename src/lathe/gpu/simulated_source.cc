#include "lathe/gpu/simulated_source.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>

#include "lathe/common/units.h"
#include "lathe/gpu/sim_load.h"

namespace lathe::gpu {
namespace {

constexpr std::string_view kSimPrefix = "sim:";
// File timestamps tick with the kernel's coarse clock (a jiffy; a second on
// some file systems): a file this recently modified may change again without
// its stamp changing, so it is read again.
constexpr int64_t kRacyStampMs = 1000;
constexpr int64_t kNsPerMs = 1'000'000;

// `part` names the piece of the grammar that is wrong: sim:, N, SIZE, MODEL, @FILE.
Status BadSpec(std::string_view spec, std::string_view part) {
  return Status::Msg(Code::kInvalidArgument, "gpu.sim_spec",
                     {{"spec", std::string(spec)},
                      {"part", std::string(part)},
                      {"max", std::to_string(kMaxSimulatedGpus)}});
}

// Whole-string decimal count; from_chars alone accepts trailing junk.
bool ParseCount(std::string_view s, int& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

bool ValidModel(std::string_view m) {
  if (m.empty() || m.size() > kMaxSimulatedModelChars || m.front() == ' ' || m.back() == ' ') {
    return false;
  }
  for (char c : m) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != ' ' && c != '.' && c != '-' &&
        c != '_') {
      return false;
    }
  }
  return true;
}

bool StartsWithWord(std::string_view s, std::string_view word) {
  if (s.size() < word.size()) return false;
  for (size_t i = 0; i < word.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != word[i]) return false;
  }
  return s.size() == word.size() || s[word.size()] == ' ';
}

std::string GpuName(const std::string& model) {
  if (model.empty()) return "Simulated GPU";
  if (StartsWithWord(model, "nvidia") || StartsWithWord(model, "amd")) {
    return model + " (simulated)";
  }
  return "NVIDIA " + model + " (simulated)";
}

Result<SimGroup> ParseGroup(std::string_view spec, std::string_view text) {
  SimGroup g;
  size_t colon = text.find(':');
  if (colon != std::string_view::npos) {
    g.model = std::string(text.substr(colon + 1));
    if (!ValidModel(g.model)) return BadSpec(spec, "MODEL");
    text = text.substr(0, colon);
  }
  size_t x = text.find('x');
  if (!ParseCount(text.substr(0, x), g.count) || g.count < 1) return BadSpec(spec, "N");
  if (x == std::string_view::npos) return g;
  auto bytes = ParseBytes(text.substr(x + 1));
  if (!bytes.ok() || *bytes == 0) return BadSpec(spec, "SIZE");
  g.memory_bytes = *bytes;
  return g;
}

std::vector<GpuInfo> IdleGpus(const SimSpec& spec) {
  std::vector<GpuInfo> gpus;
  for (const SimGroup& group : spec.groups) {
    for (int i = 0; i < group.count; ++i) {
      GpuInfo g;
      g.index = static_cast<int>(gpus.size());
      g.uuid = fmt::format("GPU-sim-{:04d}", g.index);
      g.name = GpuName(group.model);
      g.memory_total_bytes = group.memory_bytes;
      g.memory_used_bytes = 0;
      g.utilization_gpu_pct = 0;
      g.utilization_mem_pct = 0;
      g.throttle_reasons = 0;
      g.ecc_enabled = false;
      g.ecc_uncorrected_errors = 0;
      g.mig_enabled = false;
      g.persistence_mode = true;
      g.processes = std::vector<GpuProcess>{};
      gpus.push_back(std::move(g));
    }
  }
  return gpus;
}

std::string SpecNote(const SimSpec& spec) {
  if (spec.groups.size() == 1 && spec.groups[0].model.empty()) {
    return fmt::format("{} simulated GPUs of {} each", spec.groups[0].count,
                       FormatBytes(spec.groups[0].memory_bytes));
  }
  std::vector<std::string> parts;
  for (const SimGroup& g : spec.groups) {
    parts.push_back(fmt::format("{} × {}{}{}", g.count, g.model, g.model.empty() ? "" : " ",
                                FormatBytes(g.memory_bytes)));
  }
  return fmt::format("{} simulated GPUs: {}", spec.TotalCount(), fmt::join(parts, ", "));
}

}  // namespace

int SimSpec::TotalCount() const {
  int n = 0;
  for (const SimGroup& g : groups) n += g.count;
  return n;
}

Result<SimSpec> ParseSimSpec(std::string_view spec) {
  if (spec.substr(0, kSimPrefix.size()) != kSimPrefix) return BadSpec(spec, "sim:");
  std::string_view body = spec.substr(kSimPrefix.size());
  SimSpec out;
  if (size_t at = body.find('@'); at != std::string_view::npos) {
    out.load_path = std::string(body.substr(at + 1));
    if (out.load_path.empty() || out.load_path.front() != '/') return BadSpec(spec, "@FILE");
    body = body.substr(0, at);
  }
  int total = 0;
  while (true) {
    size_t comma = body.find(',');
    ASSIGN_OR_RETURN(SimGroup g, ParseGroup(spec, body.substr(0, comma)));
    total += g.count;
    if (total > kMaxSimulatedGpus) return BadSpec(spec, "N");
    out.groups.push_back(std::move(g));
    if (comma == std::string_view::npos) break;
    body = body.substr(comma + 1);
  }
  return out;
}

SimulatedSource::SimulatedSource(SimSpec spec, os::Clock& clock)
    : spec_(std::move(spec)),
      clock_(clock),
      idle_(IdleGpus(spec_)),
      spec_note_(SpecNote(spec_)),
      loaded_(idle_) {}

Result<std::unique_ptr<SimulatedSource>> SimulatedSource::Create(std::string_view spec) {
  ASSIGN_OR_RETURN(SimSpec parsed, ParseSimSpec(spec));
  return std::make_unique<SimulatedSource>(std::move(parsed));
}

void SimulatedSource::RefreshLoad() {
  const std::string& path = spec_.load_path;
  auto stamp = os::StatFile(path);
  if (!stamp.ok() && stamp.status().IsNotFound()) {
    loaded_ = idle_;
    stamp_.reset();
    load_note_ = fmt::format("no load file at {} yet: idle", path);
    return;
  }
  if (stamp.ok() && stamp_ && *stamp == *stamp_ &&
      stamp->mtime_ns / kNsPerMs + kRacyStampMs < read_at_ms_) {
    return;  // unchanged since a read that came well after its last write
  }
  read_at_ms_ = clock_.NowMs();
  auto text = stamp.ok() ? os::ReadFile(path) : Result<std::string>(stamp.status());
  Status applied = text.ok() ? Status::OK() : text.status();
  std::vector<GpuInfo> gpus = idle_;
  if (applied.ok()) applied = ApplySimLoad(*text, path, gpus);
  if (!applied.ok()) {
    // The last good load stays: a writer caught half-way must not make busy GPUs look idle.
    stamp_ = stamp.ok() ? std::optional(*stamp) : std::nullopt;
    load_note_ = fmt::format("load file not applied: {}", applied.message());
    return;
  }
  loaded_ = std::move(gpus);
  stamp_ = *stamp;
  load_note_ = fmt::format("load from {}", path);
}

Result<Inventory> SimulatedSource::Sample() {
  Inventory inv;
  inv.source = "simulated";
  inv.simulated = true;
  if (spec_.load_path.empty()) {
    inv.note = spec_note_;
    inv.gpus = idle_;
    return inv;
  }
  std::lock_guard<std::mutex> lock(mu_);
  RefreshLoad();
  inv.note = fmt::format("{}; {}", spec_note_, load_note_);
  inv.gpus = loaded_;
  return inv;
}

}  // namespace lathe::gpu
