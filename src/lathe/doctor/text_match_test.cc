#include "lathe/doctor/text_match.h"

#include <gtest/gtest.h>

#include "lathe/doctor/probes.h"

namespace lathe::doctor {
namespace {

TEST(TextMatch, DecodeAndSanitize) {
  EXPECT_EQ(DecodeUtf8("a中"), std::u32string(U"a中"));
  EXPECT_EQ(DecodeUtf8("\xff"
                       "a"),
            std::u32string(U"\uFFFDa"));
  EXPECT_EQ(DecodeUtf8("\xc0\x80"), std::u32string(U"\uFFFD\uFFFD"));  // overlong NUL
  EXPECT_EQ(DecodeUtf8("\xed\xa0\x80").size(), 3u);                    // a surrogate
  EXPECT_EQ(SanitizeUtf8("ok\xe4\xb8"), "ok\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(TextMatch, NormalizeKey) {
  EXPECT_EQ(NormalizeKey("  NCCL_IB_DISABLE "), "nccl ib disable");
  EXPECT_EQ(NormalizeKey("nccl-ib--disable"), "nccl ib disable");
  EXPECT_EQ(NormalizeKey("禁用　InfiniBand"), "禁用 infiniband");
  EXPECT_EQ(NormalizeKey("_-/"), "");
}

TEST(TextMatch, EditDistance) {
  EXPECT_EQ(EditDistance(U"kitten", U"sitting", 5), 3u);
  EXPECT_EQ(EditDistance(U"抢占式实例", U"抢占实例", 2), 1u);
  EXPECT_EQ(EditDistance(U"abc", U"xyzxyzxyz", 2), 3u);  // limit + 1
  EXPECT_EQ(EditDistance(U"", U"", 0), 0u);
}

TEST(TextMatch, PhraseTokens) {
  auto t = PhraseTokens("多节点训练 NCCL timeout x");
  EXPECT_TRUE(t.count("多节"));
  EXPECT_TRUE(t.count("训练"));
  EXPECT_TRUE(t.count("nccl"));
  EXPECT_FALSE(t.count("x"));
  EXPECT_TRUE(PhraseTokens("卡").count("卡"));
  EXPECT_DOUBLE_EQ(PhraseOverlap(PhraseTokens("节点"), PhraseTokens("多节点训练")), 1.0);
  EXPECT_DOUBLE_EQ(PhraseOverlap({}, PhraseTokens("x")), 0.0);
}

TEST(Probes, Parsers) {
  EXPECT_EQ(ParseNvccVersion("nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, "
                             "release 13.0, V13.0.88\n"),
            "13.0");
  EXPECT_EQ(ParseNvccVersion("garbage"), "");
  EXPECT_EQ(CudartVersionFromName("libcudart.so.12.1.105"), "12.1");
  EXPECT_EQ(CudartVersionFromName("libcudart.so.11.0"), "11.0");
  EXPECT_EQ(CudartVersionFromName("libcudart.so"), "");
  TorchProbe p;
  ParseTorchProbeOutput(
      "noise\n{\"importable\": true, \"version\": \"2.3.1\", \"cuda\": \"12.1\","
      " \"cuda_available\": true, \"arch_list\": [\"sm_80\"],"
      " \"capabilities\": [\"8.0\"]}\n",
      p);
  EXPECT_EQ(p.state, ProbeState::kDone);
  EXPECT_EQ(p.cuda, "12.1");
  EXPECT_EQ(p.arch_list, std::vector<std::string>{"sm_80"});
  TorchProbe bad;
  ParseTorchProbeOutput("Segmentation fault", bad);
  EXPECT_EQ(bad.state, ProbeState::kFailed);
}

}  // namespace
}  // namespace lathe::doctor
