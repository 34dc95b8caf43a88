#include "lathe/gpu/cdi.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace lathe::gpu {
namespace {

// What `nvidia-ctk cdi generate` writes, cut down.
constexpr char kSpec[] = R"(cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
containerEdits:
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1
  - hostPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05
    containerPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05
)";

TEST(Cdi, ReadsTheDriverVersionOfASpecAndOfTheModule) {
  EXPECT_TRUE(CdiHasNvidiaGpus(kSpec));
  EXPECT_FALSE(CdiHasNvidiaGpus("kind: vendor.com/fpga\n"));
  EXPECT_EQ(CdiDriverVersion(kSpec).value_or(""), "535.104.05");
  EXPECT_FALSE(CdiDriverVersion("hostPath: /usr/lib/libcuda.so.1\n").has_value());
  EXPECT_EQ(LoadedDriverVersion("535.104.05\n").value_or(""), "535.104.05");
  EXPECT_EQ(LoadedDriverVersion("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  "
                                "Thu Feb 22 01:44:30 UTC 2024\nGCC version:  gcc 12\n")
                .value_or(""),
            "550.54.14");
  EXPECT_FALSE(LoadedDriverVersion("").has_value());
}

class CdiTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-cdi-XXXXXX";
    root_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  std::string root_;
};

TEST_F(CdiTree, AStaleSpecIsFoundAndExplained) {
  Write("/etc/cdi/nvidia.yaml", kSpec);
  Write("/etc/cdi/README", "not a spec");
  Write("/sys/module/nvidia/version", "550.54.14\n");  // the driver was updated
  CdiState s = ReadCdiState(root_);
  ASSERT_EQ(s.specs.size(), 1u);
  EXPECT_EQ(s.specs[0].driver_version, "535.104.05");
  EXPECT_EQ(s.loaded_driver, "550.54.14");
  Status st = CheckCdiCurrent(s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("nvidia-ctk cdi generate"), std::string::npos) << st.ToString();
  EXPECT_NE(st.ToString().find("535.104.05"), std::string::npos);
  Write("/sys/module/nvidia/version", "535.104.05\n");
  EXPECT_TRUE(CheckCdiCurrent(ReadCdiState(root_)).ok());
}

TEST_F(CdiTree, NoSpecOrNoDriverIsNotStale) {
  EXPECT_TRUE(ReadCdiState(root_).specs.empty());
  EXPECT_TRUE(CheckCdiCurrent(ReadCdiState(root_)).ok());
  Write("/var/run/cdi/nvidia.json", kSpec);
  CdiState s = ReadCdiState(root_);
  EXPECT_EQ(s.specs.size(), 1u);
  EXPECT_EQ(s.loaded_driver, "");
  EXPECT_TRUE(CheckCdiCurrent(s).ok());
}

}  // namespace
}  // namespace lathe::gpu
