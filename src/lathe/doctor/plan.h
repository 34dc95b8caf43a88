// `lathe plan`: how much GPU memory a training (or int8 inference) setup
// needs per GPU, term by term, with the formula of each term.
//
// Model states, in bytes per parameter Ψ (the ZeRO paper's accounting,
// Rajbhandari et al. 2020, §3.1):
//   weights     fp32 4 | bf16/fp16 2 | int8 1
//   gradients   same as the training dtype (fp32 4, bf16/fp16 2); none for int8
//   optimizer   AdamW: fp32 8 (m, v); mixed 12 (fp32 master, m, v) = the paper's K=12
//               SGD with momentum: fp32 4; mixed 8 (master, momentum)
//               Adafactor: fp32 0; mixed 4 (master) — its factored second
//               moment is O(rows + cols) per matrix and is left out
//   ZeRO over N GPUs: stage ≥ 1 divides the optimizer states by N, ≥ 2 also
//   the gradients, 3 also the weights.
// Activations per GPU (Korthikanti et al. 2022, "Reducing Activation
// Recomputation in Large Transformer Models", eq. 1, no tensor parallelism):
//   L · s·b·h · (34 + 5·a·s/h) bytes in 16-bit (×2 in fp32);
//   with full activation checkpointing: 2·s·b·h·L (each layer's input) plus
//   one layer recomputed at a time.
// Parameters from a shape: Ψ ≈ 12·L·h² + V·h (blocks + embedding).
// Framework overhead: a fixed kOverheadBytes (CUDA context, cuBLAS/cuDNN
// workspaces) plus kFragmentationShare of everything else.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lathe/common/status.h"

namespace lathe::doctor {

enum class Precision { kFp32, kBf16, kFp16, kInt8 };
enum class Optimizer { kAdamW, kSgd, kAdafactor };

// "fp32" | "bf16" | "fp16" | "int8"; InvalidArgument naming the allowed values.
Result<Precision> ParsePrecision(std::string_view s);
// "adamw" | "sgd" | "adafactor"
Result<Optimizer> ParseOptimizer(std::string_view s);

inline constexpr double kOverheadBytes = 1.0e9;      // per GPU
inline constexpr double kFragmentationShare = 0.05;  // of states + activations

struct PlanInput {
  uint64_t params = 0;                               // Ψ; 0: computed from the shape
  int layers = 0, hidden = 0, heads = 0, vocab = 0;  // 0 = unknown
  Precision precision = Precision::kBf16;
  Optimizer optimizer = Optimizer::kAdamW;
  int batch = 1;  // micro-batch per GPU
  int seq_len = 2048;
  int grad_accum = 1;  // does not change memory; scales tokens per step
  bool checkpointing = false;
  int zero = 0;  // 0..3
  int gpus = 1;  // data-parallel GPUs (ZeRO divides by this)
};

// Bytes per GPU, each term with the formula that produced it.
struct MemoryPlan {
  uint64_t params = 0;
  double weights = 0, gradients = 0, optimizer = 0;
  // nullopt without layers, hidden and heads, and for int8 inference (the
  // KV cache depends on the server); the formula is then empty.
  std::optional<double> activations;
  double overhead = 0;
  double total = 0;  // without activations when they are unknown
  // Each term's formula in Ψ, N, L, s, b, h, a ("12·Ψ / N"); math only.
  std::string weights_formula, gradients_formula, optimizer_formula, activations_formula;
  double ModelStates() const { return weights + gradients + optimizer; }
};

// InvalidArgument (catalog id plan.bad_input, naming the field) for: no
// parameter count and no shape, a non-positive batch/seq_len/grad_accum/gpus,
// zero outside 0..3, or int8 with ZeRO (int8 plans inference only: weights
// and overhead, no gradients or optimizer states).
Result<MemoryPlan> PlanMemory(const PlanInput& in);

}  // namespace lathe::doctor
