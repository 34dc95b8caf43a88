// `lathe plan`: the memory model against published figures, the GPU
// catalogue, and the report.
#include "lathe/doctor/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "lathe/common/embedded.h"
#include "lathe/doctor/gpu_catalog.h"
#include "lathe/doctor/plan_format.h"

namespace lathe::doctor {
namespace {

MemoryPlan Plan(const PlanInput& in) {
  auto r = PlanMemory(in);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : MemoryPlan{};
}

// Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
// Parameter Models" (SC 2020), Figure 1: a 7.5B-parameter model, mixed
// precision Adam (K = 12), N_d = 64 GPUs. Model states per GPU: baseline
// 120 GB, P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.9 GB.
TEST(PlanMemory, ZeroPaperFigure1) {
  PlanInput in;
  in.params = 7'500'000'000;
  in.precision = Precision::kFp16;
  in.optimizer = Optimizer::kAdamW;
  in.gpus = 64;
  const double expected_gb[] = {120.0, 31.4, 16.6, 1.9};
  for (int stage = 0; stage <= 3; ++stage) {
    in.zero = stage;
    MemoryPlan p = Plan(in);
    EXPECT_NEAR(p.ModelStates() / 1e9, expected_gb[stage], 0.05) << "ZeRO stage " << stage;
  }
}

// The same paper, §3.1: "a model with 1.5 Billion parameters (GPT-2) …
// mixed-precision training with Adam … requires at least 24 GB of memory"
// for its model states (16Ψ bytes) — while its fp16 weights alone are 3 GB.
TEST(PlanMemory, ZeroPaperGpt2Section3) {
  PlanInput in;
  in.params = 1'500'000'000;
  in.precision = Precision::kFp16;
  MemoryPlan p = Plan(in);
  EXPECT_NEAR(p.ModelStates() / 1e9, 24.0, 1e-9);
  EXPECT_NEAR(p.weights / 1e9, 3.0, 1e-9);
  EXPECT_EQ(p.optimizer_formula, "12·Ψ");
}

// GPT-2 XL (Radford et al. 2019): 48 layers, d_model 1600, vocabulary 50257;
// Hugging Face's gpt2-xl has 1,557,611,200 parameters. 12·L·h² + V·h is
// within 1% (it leaves out position embeddings, biases and layer norms).
TEST(PlanMemory, ParametersFromShape) {
  PlanInput in;
  in.layers = 48;
  in.hidden = 1600;
  in.heads = 25;
  in.vocab = 50257;
  MemoryPlan p = Plan(in);
  EXPECT_NEAR(static_cast<double>(p.params), 1'557'611'200.0, 0.01 * 1'557'611'200.0);
}

// Korthikanti et al. 2022, eq. 1: s·b·h·(34 + 5·a·s/h) bytes per layer.
TEST(PlanMemory, ActivationsAndCheckpointing) {
  PlanInput in;
  in.params = 1'000'000'000;
  in.layers = 24;
  in.hidden = 2048;
  in.heads = 16;
  in.seq_len = 2048;
  in.batch = 4;
  MemoryPlan p = Plan(in);
  double sbh = 2048.0 * 4 * 2048;
  double per_layer = sbh * (34 + 5.0 * 16 * 2048 / 2048);
  ASSERT_TRUE(p.activations.has_value());
  EXPECT_DOUBLE_EQ(*p.activations, 24 * per_layer);
  in.checkpointing = true;
  MemoryPlan c = Plan(in);
  EXPECT_DOUBLE_EQ(*c.activations, 2 * sbh * 24 + per_layer);
  EXPECT_LT(*c.activations, *p.activations / 5);
  in.precision = Precision::kFp32;
  in.checkpointing = false;
  EXPECT_DOUBLE_EQ(*Plan(in).activations, 2 * 24 * per_layer);
  EXPECT_GT(p.total, p.ModelStates() + *p.activations);  // overhead on top
}

TEST(PlanMemory, OptimizersAndInference) {
  PlanInput in;
  in.params = 1'000'000'000;
  in.optimizer = Optimizer::kSgd;
  EXPECT_DOUBLE_EQ(Plan(in).optimizer, 8e9);
  in.precision = Precision::kFp32;
  EXPECT_DOUBLE_EQ(Plan(in).optimizer, 4e9);
  in.optimizer = Optimizer::kAdafactor;
  EXPECT_DOUBLE_EQ(Plan(in).optimizer, 0);
  in.precision = Precision::kInt8;
  MemoryPlan i = Plan(in);
  EXPECT_DOUBLE_EQ(i.weights, 1e9);
  EXPECT_DOUBLE_EQ(i.gradients + i.optimizer, 0);
  EXPECT_FALSE(i.activations.has_value());
}

TEST(PlanMemory, RejectsBadInput) {
  PlanInput none;
  auto r = PlanMemory(none);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().msg_id(), "plan.bad_input");
  PlanInput in;
  in.params = 1000;
  in.zero = 4;
  EXPECT_FALSE(PlanMemory(in).ok());
  in.zero = 0;
  in.batch = 0;
  EXPECT_FALSE(PlanMemory(in).ok());
  EXPECT_FALSE(ParsePrecision("fp8").ok());
  EXPECT_TRUE(ParseOptimizer("adam").ok());
  EXPECT_FALSE(ParseOptimizer("lion").ok());
}

TEST(GpuCatalog, EmbeddedCatalogAndMatching) {
  auto c = ParseGpuCatalog(FindEmbedded("gpu_catalog.yaml"), "gpu_catalog.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_GE(c->size(), 10u);
  auto id = [&](const std::string& name) {
    const GpuModel* m = MatchGpuModel(*c, name);
    return m ? m->id : "<none>";
  };
  EXPECT_EQ(id("NVIDIA A100-SXM4-80GB"), "a100-80gb");
  EXPECT_EQ(id("NVIDIA A10G"), "a10g");
  EXPECT_EQ(id("NVIDIA A10"), "a10");
  EXPECT_EQ(id("NVIDIA L4"), "l4");
  EXPECT_EQ(id("NVIDIA L40S"), "l40s");
  EXPECT_EQ(id("NVIDIA H100 80GB HBM3"), "h100-sxm");
  EXPECT_EQ(id("NVIDIA H200"), "h200");
  EXPECT_EQ(id("Tesla T4"), "t4");
  EXPECT_EQ(id("Simulated GPU"), "<none>");
  EXPECT_FALSE(
      ParseGpuCatalog("- id: x\n  name: X\n  memory: lots\n  bf16_tflops: '1'\n", "t").ok());
}

TEST(GpuCatalog, FitsThroughputCostAndPrices) {
  std::vector<GpuModel> catalog = DefaultGpuCatalog();
  ASSERT_TRUE(
      ApplyPrices(catalog, "- id: h100-sxm\n  price_usd_hour: '2.00'\n", "prices.yaml").ok());
  EXPECT_FALSE(ApplyPrices(catalog, "- id: nope\n  price_usd_hour: '1'\n", "prices.yaml").ok());
  PlanInput in;
  in.params = 7'000'000'000;  // 7B, bf16, AdamW: 112 GB of model states
  MemoryPlan p = Plan(in);
  gpu::Inventory local;
  gpu::GpuInfo g;
  g.index = 0;
  g.name = "NVIDIA H100 80GB HBM3";
  g.memory_total_bytes = 85'520'809'984ULL;
  local.gpus.push_back(g);
  auto fits = FitGpus(p, in, catalog, &local, 0.4);
  ASSERT_EQ(fits.size(), catalog.size() + 1);
  EXPECT_TRUE(fits[0].local);
  EXPECT_FALSE(fits[0].fits);
  double tps = 0.4 * 989e12 / (6 * 7e9);
  ASSERT_TRUE(fits[0].tokens_per_s.has_value());
  EXPECT_NEAR(*fits[0].tokens_per_s, tps, 1e-6 * tps);
  EXPECT_NEAR(*fits[0].usd_per_mtok, 2.0 / 3600 / tps * 1e6, 1e-9);
  bool h200_fits = false;
  for (const auto& f : fits) {
    if (f.name == "NVIDIA H200 141GB") h200_fits = f.fits;
  }
  EXPECT_TRUE(h200_fits);
}

TEST(GpuCatalog, OverridePathsFollowXdg) {
  auto env = [](const char* n) -> const char* {
    if (std::string_view(n) == "XDG_CONFIG_HOME") return "/cfg";
    if (std::string_view(n) == "HOME") return "/home/u";
    return nullptr;
  };
  EXPECT_EQ(
      GpuCatalogOverridePaths(env),
      (std::vector<std::string>{"/etc/lathe/gpu_catalog.yaml", "/cfg/lathe/gpu_catalog.yaml"}));
  auto home_only = [](const char* n) -> const char* {
    return std::string_view(n) == "HOME" ? "/home/u" : nullptr;
  };
  EXPECT_EQ(GpuCatalogOverridePaths(home_only).back(), "/home/u/.config/lathe/gpu_catalog.yaml");
  auto none = [](const char*) -> const char* { return nullptr; };
  EXPECT_EQ(GpuCatalogOverridePaths(none), std::vector<std::string>{"/etc/lathe/gpu_catalog.yaml"});
}

TEST(GpuCatalog, OverrideFilesReplaceByIdAndAdd) {
  std::string dir = ::testing::TempDir() + "/gpu_catalog_override";
  std::filesystem::create_directories(dir);
  std::string system = dir + "/system.yaml", user = dir + "/user.yaml";
  {
    std::ofstream(system)
        << "- id: h100-sxm\n  name: Our H100\n  memory: 80GiB\n  bf16_tflops: '989'\n"
           "  price_usd_hour: '1.25'\n";
    std::ofstream(user)
        << "- id: lab-card\n  name: Lab Card 48GB\n  memory: 48GiB\n  bf16_tflops: '150'\n";
  }
  std::vector<std::string> read;
  auto c = LoadGpuCatalog({system, dir + "/missing.yaml", user}, &read);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(read, (std::vector<std::string>{system, user}));
  EXPECT_EQ(c->size(), DefaultGpuCatalog().size() + 1);
  auto h100 =
      std::find_if(c->begin(), c->end(), [](const GpuModel& m) { return m.id == "h100-sxm"; });
  ASSERT_NE(h100, c->end());
  EXPECT_EQ(h100->name, "Our H100");
  EXPECT_EQ(*h100->price_usd_hour, 1.25);
  EXPECT_EQ(c->back().id, "lab-card");
  { std::ofstream(user) << "- id: bad\n  name: Bad\n  memory: lots\n  bf16_tflops: '1'\n"; }
  auto bad = LoadGpuCatalog({user}, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(user), std::string::npos) << bad.status().ToString();
  std::filesystem::remove_all(dir);
}

TEST(PlanFormat, BothLanguagesShowFormulas) {
  PlanInput in;
  in.params = 7'500'000'000;
  in.zero = 1;
  in.gpus = 64;
  MemoryPlan p = Plan(in);
  auto fits = FitGpus(p, in, DefaultGpuCatalog(), nullptr, 0.4);
  std::string en =
      FormatPlan(in, p, fits, 0.4, {{}, "/home/u/.config/lathe/gpu_catalog.yaml"}, Lang::kEn);
  EXPECT_NE(en.find("12·Ψ / N"), std::string::npos) << en;
  EXPECT_NE(en.find("optimizer states"), std::string::npos);
  EXPECT_NE(en.find("40% MFU"), std::string::npos);
  // The hint names the file that is read, not the source tree's embedded one.
  EXPECT_NE(en.find("/home/u/.config/lathe/gpu_catalog.yaml"), std::string::npos) << en;
  EXPECT_EQ(en.find("data/gpu_catalog.yaml"), std::string::npos) << en;
  EXPECT_EQ(en.find("GPU models: the built-in catalogue with"), std::string::npos) << en;
  std::string zh =
      FormatPlan(in, p, fits, 0.4, {{"/etc/lathe/gpu_catalog.yaml"}, "/etc/lathe/gpu_catalog.yaml"},
                 Lang::kZh);
  EXPECT_NE(zh.find("优化器状态"), std::string::npos);
  EXPECT_NE(zh.find("ZeRO 阶段 1"), std::string::npos);
  EXPECT_NE(zh.find("内置目录，并合并了 /etc/lathe/gpu_catalog.yaml"), std::string::npos) << zh;
  EXPECT_EQ(zh.find("data/gpu_catalog.yaml"), std::string::npos) << zh;
  Json j = PlanToJson(p, fits, 0.4);
  EXPECT_NEAR(j["bytes_per_gpu"]["optimizer"].get<double>(), 12 * 7.5e9 / 64, 1);
  EXPECT_TRUE(j["bytes_per_gpu"]["activations"].is_null());
}

}  // namespace
}  // namespace lathe::doctor
