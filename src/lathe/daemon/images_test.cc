#include "lathe/daemon/images.h"

#include <gtest/gtest.h>

namespace lathe::daemon {
namespace {

TEST(ImageNames, ATagIsLatestUnlessGiven) {
  EXPECT_EQ(NormalizeImageName("pytorch"), "pytorch:latest");
  EXPECT_EQ(NormalizeImageName("pytorch:2.1"), "pytorch:2.1");
  EXPECT_EQ(NormalizeImageName("127.0.0.1:5000/team/bb"), "127.0.0.1:5000/team/bb:latest");
  EXPECT_EQ(NormalizeImageName("127.0.0.1:5000/team/bb:1"), "127.0.0.1:5000/team/bb:1");
  EXPECT_EQ(NormalizeImageName("x@sha256:abc"), "x@sha256:abc");
}

TEST(ContainerGpuDevices, CdiWhenCurrentRefusedWhenStale) {
  gpu::CdiState cdi;
  cdi.specs = {{"/etc/cdi/nvidia.yaml", "535.104.05"}};
  cdi.loaded_driver = "535.104.05";
  auto d = ContainerGpuDevices(cdi, {1, 3}, /*simulated=*/false);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, (std::vector<std::string>{"nvidia.com/gpu=1", "nvidia.com/gpu=3"}));
  cdi.loaded_driver = "550.54.14";
  auto stale = ContainerGpuDevices(cdi, {1}, false);
  ASSERT_FALSE(stale.ok());
  EXPECT_NE(stale.status().ToString().find("nvidia-ctk cdi generate"), std::string::npos);
  // No GPUs asked for: nothing to check.
  EXPECT_TRUE(ContainerGpuDevices(cdi, {}, false).ok());
}

TEST(ContainerGpuDevices, SimulatedGpusNeedNoDevicesRealOnesDo) {
  gpu::CdiState none;
  auto sim = ContainerGpuDevices(none, {0}, /*simulated=*/true);
  ASSERT_TRUE(sim.ok());
  EXPECT_TRUE(sim->empty());
  // A real GPU without a CDI spec or a device node (none on this machine).
  auto real = ContainerGpuDevices(none, {97}, /*simulated=*/false);
  ASSERT_FALSE(real.ok());
  EXPECT_NE(real.status().ToString().find("nvidia-ctk"), std::string::npos);
}

}  // namespace
}  // namespace lathe::daemon
