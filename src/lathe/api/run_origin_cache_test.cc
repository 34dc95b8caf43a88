#include "lathe/api/run_origin_cache.h"

#include <gtest/gtest.h>

#include "lathe/os/test_util/fake_clock.h"

namespace lathe::api {
namespace {

TEST(RunOriginCache, AnAdmissionIsRememberedForItsCredentialAndOriginUntilItsTimeIsUp) {
  os::FakeClock clock;
  RunOriginCache cache(clock, /*ttl_ms=*/1000);
  const std::string key = RunOriginCache::Key("r1", "", "Bearer lathe_t_a", "");
  net::Upstream up;
  up.port = 41234;
  up.owner_uid = 1001;
  cache.Put(key, RunOriginAdmission{up});
  auto hit = cache.Find(key);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->upstream.owner_uid, 1001u);
  EXPECT_EQ(hit->upstream.port, 41234);
  // Another credential, another run or port, another cookie: not the same.
  EXPECT_FALSE(cache.Find(RunOriginCache::Key("r1", "", "Bearer lathe_t_b", "")));
  EXPECT_FALSE(cache.Find(RunOriginCache::Key("r2", "", "Bearer lathe_t_a", "")));
  EXPECT_FALSE(cache.Find(RunOriginCache::Key("r1", "tb", "Bearer lathe_t_a", "")));
  EXPECT_FALSE(cache.Find(RunOriginCache::Key("r1", "", "Bearer lathe_t_a", "lathe_run=x")));
  // The key holds a digest, never the token.
  EXPECT_EQ(key.find("lathe_t_a"), std::string::npos);
  // A revoked token stops working within the time to live.
  clock.Advance(999);
  EXPECT_TRUE(cache.Find(key).has_value());
  clock.Advance(1);
  EXPECT_FALSE(cache.Find(key).has_value());
  // Without a header credential (the unix socket's peer) nothing is cached.
  EXPECT_EQ(RunOriginCache::Key("r1", "", "", ""), "");
  cache.Put("", RunOriginAdmission{});
  EXPECT_FALSE(cache.Find("").has_value());
}

TEST(RunOriginCache, ItStaysBounded) {
  os::FakeClock clock;
  RunOriginCache cache(clock, 1000, /*max_entries=*/2);
  auto key = [](int i) { return RunOriginCache::Key("r1", "", "Bearer " + std::to_string(i), ""); };
  cache.Put(key(1), {});
  cache.Put(key(2), {});
  cache.Put(key(3), {});  // full: started over
  EXPECT_FALSE(cache.Find(key(1)).has_value());
  EXPECT_TRUE(cache.Find(key(3)).has_value());
}

}  // namespace
}  // namespace lathe::api
