#include "lathe/os/file_owner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace lathe::os {
namespace {

TEST(FileOwner, IsTheFilesOwnNotItsTargets) {
  char tmpl[] = "/tmp/lathe-owner-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, link = dir + "/link";
  ASSERT_EQ(::symlink("/", link.c_str()), 0);
  auto o = LstatOwner(link);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->uid, ::geteuid());
  EXPECT_TRUE(S_ISLNK(o->mode));
  EXPECT_TRUE(LstatOwner(dir + "/missing").status().IsNotFound());
  ::unlink(link.c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace lathe::os
