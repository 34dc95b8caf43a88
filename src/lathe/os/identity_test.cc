#include "lathe/os/identity.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "lathe/os/files.h"

namespace lathe::os {
namespace {

// The kernel's own account of the process's ids: the Uid: and Gid: lines of
// /proc/self/status (real, effective, saved, file-system).
std::pair<long, long> RealAndEffective(const std::string& status, const std::string& key) {
  size_t at = status.find("\n" + key + ":");
  if (at == std::string::npos) return {-1, -1};
  size_t pos = at + key.size() + 2;
  size_t used = 0;
  long real = std::stol(status.substr(pos), &used);
  long effective = std::stol(status.substr(pos + used));
  return {real, effective};
}

TEST(Identity, IdsAreTheOnesTheKernelReports) {
  auto status = ReadFile("/proc/self/status");
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  auto [uid, euid] = RealAndEffective(*status, "Uid");
  auto [gid, egid] = RealAndEffective(*status, "Gid");
  ASSERT_GE(uid, 0);
  ASSERT_GE(gid, 0);
  EXPECT_EQ(static_cast<long>(RealUid()), uid);
  EXPECT_EQ(static_cast<long>(EffectiveUid()), euid);
  EXPECT_EQ(static_cast<long>(RealGid()), gid);
  EXPECT_EQ(static_cast<long>(EffectiveGid()), egid);
  EXPECT_EQ(IsRoot(), euid == 0);
}

TEST(Identity, FilesThisProcessCreatesBelongToItsEffectiveIds) {
  char tmpl[] = "/tmp/lathe-identity-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_TRUE(WriteFileAtomic(dir + "/f", "x", 0600).ok());
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, EffectiveUid());
  (void)RemoveAll(dir);
}

}  // namespace
}  // namespace lathe::os
