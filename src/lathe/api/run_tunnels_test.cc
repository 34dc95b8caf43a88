#include "lathe/api/run_tunnels.h"

#include <gtest/gtest.h>

namespace lathe::api {
namespace {

class FakeControl : public net::TunnelControl {
 public:
  void End() override { ended = true; }
  bool Open() const override { return !ended; }
  bool ended = false;
};

TEST(RunTunnels, EndsOnlyThoseNoLongerAllowed) {
  RunTunnels t;
  auto bobs = std::make_shared<FakeControl>();
  auto carols = std::make_shared<FakeControl>();
  t.Add("r1", daemon::Caller{1001, "bob", false}, bobs);
  t.Add("r1", daemon::Caller{1002, "carol", false}, carols);
  auto allowed = [](const std::string& run, const daemon::Caller& c) { return c.user == "carol"; };
  EXPECT_EQ(t.Recheck(allowed), 1u);
  EXPECT_TRUE(bobs->ended);
  EXPECT_FALSE(carols->ended);
  // An ended one is forgotten: the next check does not count it.
  EXPECT_EQ(t.Recheck(allowed), 0u);
}

}  // namespace
}  // namespace lathe::api
