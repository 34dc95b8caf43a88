// BackendRegistry: what a missing backend's status says, with and without
// other backends in the search directories.
#include "lathe/serve/backend.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace lathe::serve {
namespace {

TEST(BackendRegistry, NoBackendAnywhereSaysWhereTheyBelong) {
  char tmpl[] = "/tmp/lathe-backend-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string empty = tmpl;
  BackendRegistry registry({empty, empty + "/missing"});
  auto got = registry.Get("process");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kNotFound);
  EXPECT_EQ(got.status().msg_id(), "serve.backends_none");
  std::string text = got.status().ToString();
  EXPECT_NE(text.find("'process'"), std::string::npos) << text;
  EXPECT_NE(text.find(empty + ", " + empty + "/missing"), std::string::npos) << text;
  EXPECT_NE(text.find("lib/lathe/backends"), std::string::npos) << text;
  EXPECT_NE(text.find("LATHE_BACKEND_DIR"), std::string::npos) << text;
  ::rmdir(tmpl);
}

TEST(BackendRegistry, AMissingBackendListsTheOthers) {
  BackendRegistry registry({LATHE_BACKEND_BUILD_DIR});
  auto got = registry.Get("no_such_backend");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().msg_id(), "serve.backend_missing");
  std::string text = got.status().ToString();
  EXPECT_NE(text.find("identity"), std::string::npos) << text;
  EXPECT_NE(text.find("process"), std::string::npos) << text;
}

}  // namespace
}  // namespace lathe::serve
