#include "lathe/doctor/plan_format.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lathe/doctor/text_match.h"

namespace lathe::doctor {
namespace {

constexpr const char* kPrecisionNames[] = {"fp32", "bf16", "fp16", "int8"};
constexpr const char* kOptimizerNames[] = {"adamw", "sgd", "adafactor"};

std::string Gb(double bytes) { return fmt::format("{:.1f} GB", bytes / 1e9); }

std::string Count(uint64_t params) {
  double p = static_cast<double>(params);
  if (p >= 1e9) return fmt::format("{:.2f}B", p / 1e9);
  if (p >= 1e6) return fmt::format("{:.1f}M", p / 1e6);
  return std::to_string(params);
}

size_t Width(const std::string& s) {
  size_t w = 0;
  for (char32_t c : DecodeUtf8(s)) w += IsCjk(c) || (c >= 0xFF00 && c <= 0xFFEF) ? 2 : 1;
  return w;
}

std::string Pad(const std::string& s, size_t w) {
  size_t have = Width(s);
  return s + std::string(w > have ? w - have : 0, ' ');
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& r : rows) {
    widths.resize(std::max(widths.size(), r.size()), 0);
    for (size_t i = 0; i < r.size(); ++i) widths[i] = std::max(widths[i], Width(r[i]));
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line = "  ";
    for (size_t i = 0; i < r.size(); ++i)
      line += i + 1 < r.size() ? Pad(r[i], widths[i] + 2) : r[i];
    out += line + "\n";
  }
  return out;
}

std::vector<std::vector<std::string>> BreakdownRows(const MemoryPlan& p, Lang lang) {
  std::string act = p.activations ? Gb(*p.activations) : "?";
  std::string act_note = p.activations
                             ? p.activations_formula + "  " + Tr("plan.note.activations", lang)
                             : Tr("plan.note.activations_unknown", lang);
  return {{Tr("plan.row.weights", lang), Gb(p.weights), p.weights_formula},
          {Tr("plan.row.gradients", lang), Gb(p.gradients), p.gradients_formula},
          {Tr("plan.row.optimizer", lang), Gb(p.optimizer), p.optimizer_formula},
          {Tr("plan.row.activations", lang), act, act_note},
          {Tr("plan.row.overhead", lang), Gb(p.overhead), Tr("plan.note.overhead", lang)},
          {Tr("plan.row.total", lang), Gb(p.total), ""}};
}

std::vector<std::vector<std::string>> GpuRows(const std::vector<GpuFit>& fits, Lang lang) {
  std::vector<std::vector<std::string>> rows = {
      {Tr("plan.col.gpu", lang), Tr("plan.col.memory", lang), Tr("plan.col.fits", lang),
       Tr("plan.col.tokens", lang), Tr("plan.col.cost", lang)}};
  for (const auto& f : fits) {
    rows.push_back({f.name + (f.local ? " *" : ""), Gb(static_cast<double>(f.memory_bytes)),
                    Tr(f.fits ? "plan.yes" : "plan.no", lang),
                    f.tokens_per_s ? fmt::format("{:.0f}", *f.tokens_per_s) : "?",
                    f.usd_per_mtok ? fmt::format("{:.2f}", *f.usd_per_mtok) : "-"});
  }
  return rows;
}

}  // namespace

std::string FormatPlan(const PlanInput& in, const MemoryPlan& p, const std::vector<GpuFit>& fits,
                       double mfu, const CatalogSource& source, Lang lang) {
  std::string out = Tr("plan.summary", lang,
                       {{"params", Count(p.params)},
                        {"precision", kPrecisionNames[static_cast<int>(in.precision)]},
                        {"optimizer", kOptimizerNames[static_cast<int>(in.optimizer)]},
                        {"batch", std::to_string(in.batch)},
                        {"seq", std::to_string(in.seq_len)},
                        {"accum", std::to_string(in.grad_accum)},
                        {"ckpt", Tr(in.checkpointing ? "plan.on" : "plan.off", lang)},
                        {"zero", std::to_string(in.zero)},
                        {"gpus", std::to_string(in.gpus)}}) +
                    "\n\n" + Tr("plan.memory_per_gpu", lang) + "\n" + Table(BreakdownRows(p, lang));
  out += "\n" + Table(GpuRows(fits, lang));
  out += "\n" +
         Tr("plan.assumptions", lang,
            {{"mfu", fmt::format("{:.0f}", mfu * 100)},
             {"flops", fmt::format("{:.0f}", FlopsPerTokenPerParam(in))},
             {"catalog", source.edit_file}}) +
         "\n";
  if (!source.catalog_files.empty()) {
    out += Tr("plan.catalog_files", lang,
              {{"files", fmt::format("{}", fmt::join(source.catalog_files, ", "))}}) +
           "\n";
  }
  return out;
}

Json PlanToJson(const MemoryPlan& p, const std::vector<GpuFit>& fits, double mfu) {
  Json gpus = Json::array();
  for (const auto& f : fits) {
    gpus.push_back({{"name", f.name},
                    {"local", f.local},
                    {"memory_bytes", f.memory_bytes},
                    {"fits", f.fits},
                    {"tokens_per_s", f.tokens_per_s ? Json(*f.tokens_per_s) : Json(nullptr)},
                    {"usd_per_mtok", f.usd_per_mtok ? Json(*f.usd_per_mtok) : Json(nullptr)}});
  }
  return {{"params", p.params},
          {"bytes_per_gpu",
           {{"weights", p.weights},
            {"gradients", p.gradients},
            {"optimizer", p.optimizer},
            {"activations", p.activations ? Json(*p.activations) : Json(nullptr)},
            {"overhead", p.overhead},
            {"total", p.total}}},
          {"formulas",
           {{"weights", p.weights_formula},
            {"gradients", p.gradients_formula},
            {"optimizer", p.optimizer_formula},
            {"activations", p.activations_formula}}},
          {"gpus", gpus},
          {"mfu", mfu}};
}

}  // namespace lathe::doctor
