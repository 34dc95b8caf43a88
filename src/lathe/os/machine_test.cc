#include "lathe/os/machine.h"

#include <gtest/gtest.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <string>

#include "lathe/os/files.h"

namespace lathe::os {
namespace {

TEST(Machine, OnlineCpusAreTheKernelsCount) {
  EXPECT_GE(OnlineCpus(), 1);
  EXPECT_EQ(OnlineCpus(), ::get_nprocs());
}

TEST(Machine, PhysicalMemoryIsMemTotal) {
  auto meminfo = ReadFile("/proc/meminfo");
  ASSERT_TRUE(meminfo.ok());
  ASSERT_EQ(meminfo->rfind("MemTotal:", 0), 0u);
  const uint64_t total_bytes = std::stoull(meminfo->substr(9)) * 1024;
  const uint64_t got = PhysicalMemoryBytes();
  // The same pages, counted in pages here and in kB there.
  EXPECT_GT(got, 0u);
  const uint64_t page = static_cast<uint64_t>(::getpagesize());
  EXPECT_LE(got > total_bytes ? got - total_bytes : total_bytes - got, page);
}

}  // namespace
}  // namespace lathe::os
