#include "lathe/gpu/top_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lathe/common/display_width.h"

namespace lathe::gpu {
namespace {

using ::testing::HasSubstr;

// Two simulated L4s; GPU 0 busy and held by alice's run, GPU 1 idle and free;
// a queued run of high priority.
TopInput Fake() {
  TopInput in;
  in.gpus = Json::parse(R"j({"source": "simulated", "simulated": true, "note": "", "gpus": [
    {"index": 0, "name": "NVIDIA L4 (simulated)", "utilization_gpu_pct": 87,
     "memory_used_bytes": 20000000000, "memory_total_bytes": 24000000000, "temperature_c": 71,
     "power_w": 250.4, "power_limit_w": 400, "throttle_reason_names": ["sw_thermal", "gpu_idle"],
     "error": "", "allocated_to": "r-abc"},
    {"index": 1, "name": "NVIDIA L4 (simulated)", "utilization_gpu_pct": 0,
     "memory_used_bytes": 0, "memory_total_bytes": 24000000000, "temperature_c": null,
     "power_w": null, "power_limit_w": null, "throttle_reason_names": ["gpu_idle"],
     "error": "", "allocated_to": null}]})j");
  in.runs = Json::parse(R"j({"runs": [
    {"id": "r-abc", "name": "训练-bert", "user": "alice", "state": "running", "gpus": [0],
     "priority": "normal", "started_at_ms": 1000},
    {"id": "r-q", "name": "r-q", "user": "bob", "state": "queued", "gpus": [],
     "priority": "high", "started_at_ms": 0}]})j");
  in.now_ms = 1000 + 5 * 60 * 1000 + 3000;
  return in;
}

TEST(TopViewTest, EnglishFrame) {
  std::vector<std::string> l = RenderTop(Fake(), Lang::kEn);
  ASSERT_GE(l.size(), 10u);
  EXPECT_EQ(l[0], "2 GPUs, 1 held · runs: 1 running, 1 queued");
  EXPECT_EQ(l[1], "simulated GPUs: the values come from the load file, not from hardware");
  EXPECT_EQ(l[2], "");
  EXPECT_THAT(l[3], ::testing::StartsWith("GPU  NAME                   UTIL"));
  EXPECT_EQ(l[4],
            "  0  NVIDIA L4 (simulated)  [########..]  87%  20GB/24GB  71C   250W/400W  "
            "sw_thermal  r-abc 训练-bert (alice)");
  EXPECT_EQ(l[5],
            "  1  NVIDIA L4 (simulated)  [..........]   0%  0GB/24GB   -     -          -"
            "           free");
  EXPECT_EQ(l[6], "");
  EXPECT_THAT(l[7], ::testing::StartsWith("RUN    NAME       USER   STATE"));
  EXPECT_THAT(l[8], HasSubstr("r-abc  训练-bert  alice  running  0"));
  EXPECT_THAT(l[8], HasSubstr("87%  20GB/24GB  5m"));
  EXPECT_EQ(l.back(), "queue: 1 waiting (high 1, normal 0, low 0)");
  for (const auto& line : l) EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
}

TEST(TopViewTest, ChineseColumnsLineUpOnTheScreen) {
  std::vector<std::string> l = RenderTop(Fake(), Lang::kZh);
  EXPECT_THAT(l[0], HasSubstr("2 块 GPU"));
  EXPECT_THAT(l[1], HasSubstr("模拟 GPU"));
  EXPECT_THAT(l[4], HasSubstr("r-abc 训练-bert（alice）"));
  EXPECT_THAT(l[5], HasSubstr("空闲"));
  EXPECT_THAT(l[8], HasSubstr("运行中"));
  // The header's columns start where the rows' do, counted in screen columns.
  auto column_of = [](const std::string& line, const std::string& cell) {
    return DisplayWidth(line.substr(0, line.find(cell)));
  };
  EXPECT_EQ(column_of(l[3], "名称"), column_of(l[4], "NVIDIA"));
  EXPECT_EQ(column_of(l[3], "利用率"), column_of(l[4], "[#"));
  EXPECT_EQ(column_of(l[3], "占用者"), column_of(l[4], "r-abc"));
  EXPECT_EQ(column_of(l[7], "用户"), column_of(l[8], "alice"));
  EXPECT_EQ(column_of(l[7], "状态"), column_of(l[8], "运行中"));
  EXPECT_THAT(l.back(), HasSubstr("队列：1 个等待中"));
}

TEST(TopViewTest, WidthCutsLinesOnTheScreen) {
  for (Lang lang : {Lang::kEn, Lang::kZh}) {
    for (const auto& line : RenderTop(Fake(), lang, 40)) EXPECT_LE(DisplayWidth(line), 40u) << line;
  }
}

TEST(TopViewTest, NoGpusNoRunsAndUnreadableGpus) {
  TopInput none;
  none.gpus = Json::parse(R"j({"source": "none", "simulated": false, "note": "x", "gpus": []})j");
  none.runs = Json::parse(R"j({"runs": []})j");
  std::vector<std::string> l = RenderTop(none, Lang::kEn);
  EXPECT_THAT(l, ::testing::Contains("no GPUs: x"));
  EXPECT_THAT(l, ::testing::Contains("no run holds a GPU"));
  EXPECT_THAT(l, ::testing::Not(::testing::Contains(HasSubstr("simulated"))));
  TopInput lost = Fake();
  lost.gpus["gpus"][1]["error"] = "GPU is lost (15)";
  EXPECT_THAT(RenderTop(lost, Lang::kEn)[5], HasSubstr("cannot be read: GPU is lost (15)"));
}

TEST(TopViewTest, UtilizationBar) {
  EXPECT_EQ(UtilizationBar(0, 10), "[..........]");
  EXPECT_EQ(UtilizationBar(1, 10), "[#.........]");  // busy at all shows
  EXPECT_EQ(UtilizationBar(55, 10), "[#####.....]");
  EXPECT_EQ(UtilizationBar(100, 10), "[##########]");
  EXPECT_EQ(UtilizationBar(250, 4), "[####]");
  EXPECT_EQ(UtilizationBar(-1, 3), "[   ]");
}

}  // namespace
}  // namespace lathe::gpu
