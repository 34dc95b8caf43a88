#include "lathe/doctor/plan.h"

#include <fmt/format.h>

namespace lathe::doctor {
namespace {

// 16-bit activations in Korthikanti et al.'s count; fp32 doubles them.
constexpr double kActivationBytesPerElement16 = 2.0;

Status Bad(std::string field, std::string why) {
  return Status::Msg(Code::kInvalidArgument, "plan.bad_input", {{"field", field}, {"why", why}});
}

double WeightBytes(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return 4;
    case Precision::kBf16:
    case Precision::kFp16:
      return 2;
    case Precision::kInt8:
      return 1;
  }
  return 4;
}

double OptimizerBytes(Optimizer o, bool mixed) {
  switch (o) {
    case Optimizer::kAdamW:
      return mixed ? 12 : 8;
    case Optimizer::kSgd:
      return mixed ? 8 : 4;
    case Optimizer::kAdafactor:
      return mixed ? 4 : 0;
  }
  return 0;
}

Status Validate(const PlanInput& in) {
  bool shape = in.layers > 0 && in.hidden > 0;
  if (in.params == 0 && !shape) return Bad("params", "give --params or --layers and --hidden");
  if (in.batch <= 0) return Bad("batch", "must be ≥ 1");
  if (in.seq_len <= 0) return Bad("seq-len", "must be ≥ 1");
  if (in.grad_accum <= 0) return Bad("grad-accum", "must be ≥ 1");
  if (in.gpus <= 0) return Bad("gpus", "must be ≥ 1");
  if (in.zero < 0 || in.zero > 3) return Bad("zero", "must be 0, 1, 2 or 3");
  if (in.precision == Precision::kInt8 && in.zero != 0)
    return Bad("zero", "int8 plans inference only");
  return Status::OK();
}

// Korthikanti et al. eq. 1, per layer: s·b·h·(34 + 5·a·s/h) bytes at 16 bit.
double LayerActivations(const PlanInput& in) {
  double s = in.seq_len, b = in.batch, h = in.hidden, a = in.heads;
  return s * b * h * (34.0 + 5.0 * a * s / h);
}

void Activations(const PlanInput& in, MemoryPlan& p) {
  if (in.layers <= 0 || in.hidden <= 0 || in.heads <= 0) return;
  double scale = in.precision == Precision::kFp32 ? 2.0 : 1.0;
  double layer = LayerActivations(in) * scale;
  if (in.checkpointing) {
    double inputs =
        kActivationBytesPerElement16 * scale * in.seq_len * in.batch * in.hidden * in.layers;
    p.activations = inputs + layer;
    p.activations_formula = "2·s·b·h·L + s·b·h·(34 + 5·a·s/h)";
  } else {
    p.activations = layer * in.layers;
    p.activations_formula = "L·s·b·h·(34 + 5·a·s/h)";
  }
  if (scale != 1.0) p.activations_formula = "2 × (" + p.activations_formula + ")";
}

}  // namespace

Result<Precision> ParsePrecision(std::string_view s) {
  if (s == "fp32") return Precision::kFp32;
  if (s == "bf16") return Precision::kBf16;
  if (s == "fp16") return Precision::kFp16;
  if (s == "int8") return Precision::kInt8;
  return Bad("precision", fmt::format("'{}' is not one of fp32, bf16, fp16, int8", s));
}

Result<Optimizer> ParseOptimizer(std::string_view s) {
  if (s == "adamw" || s == "adam") return Optimizer::kAdamW;
  if (s == "sgd") return Optimizer::kSgd;
  if (s == "adafactor") return Optimizer::kAdafactor;
  return Bad("optimizer", fmt::format("'{}' is not one of adamw, sgd, adafactor", s));
}

Result<MemoryPlan> PlanMemory(const PlanInput& in) {
  RETURN_IF_ERROR(Validate(in));
  MemoryPlan p;
  double h = in.hidden, L = in.layers;
  p.params =
      in.params > 0 ? in.params : static_cast<uint64_t>(12.0 * L * h * h + double(in.vocab) * h);
  double psi = static_cast<double>(p.params);
  bool inference = in.precision == Precision::kInt8;
  bool mixed = in.precision == Precision::kBf16 || in.precision == Precision::kFp16;
  double n = in.gpus;
  double wb = WeightBytes(in.precision);
  double gb = inference ? 0 : (mixed ? 2 : 4);
  double ob = inference ? 0 : OptimizerBytes(in.optimizer, mixed);
  p.weights = wb * psi / (in.zero >= 3 ? n : 1);
  p.gradients = gb * psi / (in.zero >= 2 ? n : 1);
  p.optimizer = ob * psi / (in.zero >= 1 ? n : 1);
  p.weights_formula = fmt::format("{}·Ψ{}", wb, in.zero >= 3 ? " / N" : "");
  p.gradients_formula = inference ? "0" : fmt::format("{}·Ψ{}", gb, in.zero >= 2 ? " / N" : "");
  p.optimizer_formula = inference ? "0" : fmt::format("{}·Ψ{}", ob, in.zero >= 1 ? " / N" : "");
  if (!inference) Activations(in, p);
  double variable = p.ModelStates() + p.activations.value_or(0);
  p.overhead = kOverheadBytes + kFragmentationShare * variable;
  p.total = variable + p.overhead;
  return p;
}

}  // namespace lathe::doctor
