#include "lathe/snap/format_check.h"

#include <gtest/gtest.h>

#include "lathe/os/files.h"

#include "lathe/snap/test_util/snap_files.h"

namespace lathe::snap {
namespace {

using testing::MakeNpy;
using testing::MakeSafetensors;
using testing::MakeZip;
using testing::RandomBytes;

FormatCheck Check(const std::string& name, const std::string& data) {
  return CheckFormat(name, StringSource(data));
}

// Every strict prefix a killed writer could leave behind.
std::vector<size_t> Cuts(size_t size) {
  return {0, 3, 10, 30, size / 3, size / 2, size - 22, size - 10, size - 1};
}

std::string TorchZip(bool zip64 = false) {
  return MakeZip({{"archive/data.pkl", RandomBytes(300, 1)},
                  {"archive/data/0", RandomBytes(70000, 2)},
                  {"archive/data/1", RandomBytes(5000, 3)},
                  {"archive/version", "3\n"}},
                 zip64);
}

TEST(FormatCheckTest, PytorchZipComplete) {
  std::string z = TorchZip();
  auto c = Check("model.pt", z);
  EXPECT_EQ(c.format, "pytorch-zip");
  EXPECT_EQ(c.verdict, Verdict::kOk) << c.reason;
  EXPECT_EQ(c.tensor_offsets.size(), 4u);  // where each entry's data starts
  EXPECT_EQ(z.substr(c.tensor_offsets[1], 16), RandomBytes(70000, 2).substr(0, 16));
}

TEST(FormatCheckTest, PytorchZip64Complete) {
  auto c = Check("model.pth", TorchZip(true));
  EXPECT_EQ(c.verdict, Verdict::kOk) << c.reason;
}

// A file written by torch.save (Debian's PyTorch 1.13): it carries zip64
// records although nothing in it needs them.
TEST(FormatCheckTest, RealTorchSaveFileIsCompleteAndItsPrefixesAreNot) {
  auto data = os::ReadFile(std::string(LATHE_SOURCE_DIR) + "/tests/data/snap/torch-1.13-small.pt");
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  auto c = Check("ckpt_000007.pt", *data);
  EXPECT_EQ(c.format, "pytorch-zip");
  EXPECT_EQ(c.verdict, Verdict::kOk) << c.reason;
  EXPECT_FALSE(c.tensor_offsets.empty());
  for (size_t cut : Cuts(data->size())) {
    EXPECT_EQ(Check("ckpt_000007.pt", data->substr(0, cut)).verdict, Verdict::kIncomplete)
        << "cut at " << cut;
  }
}

TEST(FormatCheckTest, PytorchZipTruncatedIsIncomplete) {
  for (bool zip64 : {false, true}) {
    std::string z = TorchZip(zip64);
    for (size_t cut : Cuts(z.size())) {
      auto c = Check("model.pt", z.substr(0, cut));
      EXPECT_EQ(c.verdict, Verdict::kIncomplete) << "cut at " << cut << " zip64 " << zip64;
      EXPECT_FALSE(c.reason.empty());
      EXPECT_TRUE(c.tensor_offsets.empty());
    }
  }
}

TEST(FormatCheckTest, ZipWithBadDirectoryOffsetIsIncomplete) {
  std::string z = TorchZip();
  z[z.size() - 6] ^= 1;  // the central directory offset in the end record
  EXPECT_EQ(Check("model.pt", z).verdict, Verdict::kIncomplete);
}

TEST(FormatCheckTest, LegacyAndUnknownFiles) {
  EXPECT_EQ(Check("old.pt", std::string("\x80\x02\x8a\x0a", 4) + RandomBytes(100, 1)).verdict,
            Verdict::kUnchecked);
  EXPECT_EQ(Check("old.pt", "").verdict, Verdict::kIncomplete);
  auto bin = Check("data.bin", RandomBytes(100, 1));
  EXPECT_FALSE(bin.is_checkpoint());
  auto txt = Check("notes.txt", "hello");
  EXPECT_FALSE(txt.is_checkpoint());
  EXPECT_EQ(txt.verdict, Verdict::kUnchecked);
}

TEST(FormatCheckTest, SafetensorsComplete) {
  std::string s = MakeSafetensors({{"a", 1000}, {"b", 3000}}, 7);
  auto c = Check("model.safetensors", s);
  EXPECT_EQ(c.format, "safetensors");
  EXPECT_EQ(c.verdict, Verdict::kOk) << c.reason;
  ASSERT_EQ(c.tensor_offsets.size(), 2u);
  EXPECT_EQ(s.substr(c.tensor_offsets[1], 8), RandomBytes(12000, 8).substr(0, 8));
}

TEST(FormatCheckTest, SafetensorsTruncatedOrPaddedIsIncomplete) {
  std::string s = MakeSafetensors({{"a", 1000}, {"b", 3000}}, 7);
  for (size_t cut : Cuts(s.size())) {
    EXPECT_EQ(Check("m.safetensors", s.substr(0, cut)).verdict, Verdict::kIncomplete) << cut;
  }
  EXPECT_EQ(Check("m.safetensors", s + "extra").verdict, Verdict::kIncomplete);
  std::string lying = s;
  lying[0] = static_cast<char>(lying[0] + 8);  // header length beyond the real header
  EXPECT_EQ(Check("m.safetensors", lying).verdict, Verdict::kIncomplete);
}

TEST(FormatCheckTest, NpyCompleteAndTruncated) {
  std::string n = MakeNpy(5000, 9);
  auto c = Check("w.npy", n);
  EXPECT_EQ(c.verdict, Verdict::kOk) << c.reason;
  EXPECT_EQ(c.tensor_offsets, std::vector<uint64_t>{128});
  for (size_t cut : Cuts(n.size()))
    EXPECT_EQ(Check("w.npy", n.substr(0, cut)).verdict, Verdict::kIncomplete) << cut;
}

TEST(FormatCheckTest, NpzCompleteAndTruncated) {
  std::string z = MakeZip({{"w.npy", MakeNpy(1000, 1)}, {"b.npy", MakeNpy(10, 2)}});
  EXPECT_EQ(Check("arrays.npz", z).verdict, Verdict::kOk);
  for (size_t cut : Cuts(z.size()))
    EXPECT_EQ(Check("arrays.npz", z.substr(0, cut)).verdict, Verdict::kIncomplete);
}

}  // namespace
}  // namespace lathe::snap
