#include "lathe/net/conn_limits.h"

#include <gtest/gtest.h>

namespace lathe::net {
namespace {

using Admission = ConnectionLimits::Admission;

ConnClient Unix(unsigned uid, size_t limit = 0, bool reserved = false) {
  return ConnClient{"uid " + std::to_string(uid), limit, false, true, reserved};
}
ConnClient Loopback(unsigned uid, size_t limit = 0) {
  return ConnClient{"loopback uid " + std::to_string(uid), limit, true, true, false};
}

// Admits `n` connections of `c`; how many were served.
size_t Hold(ConnectionLimits& l, const ConnClient& c, size_t n) {
  size_t served = 0;
  for (size_t i = 0; i < n; ++i) served += l.Admit(c) == Admission::kServe;
  return served;
}

TEST(ConnectionLimits, AClientAtItsLimitIsRefusedAndOthersAreServed) {
  ConnectionLimits l(ConnLimitOptions{.max_connections = 100});
  EXPECT_EQ(Hold(l, Loopback(1001, 3), 5), 3u);
  EXPECT_EQ(l.Admit(Loopback(1001, 3)), Admission::kRejectClient);
  EXPECT_EQ(l.Admit(Loopback(1002, 3)), Admission::kServe);
  l.Release(Loopback(1001, 3), true);
  EXPECT_EQ(l.Admit(Loopback(1001, 3)), Admission::kServe);
  EXPECT_EQ(l.held_by("loopback uid 1001"), 3u);
}

TEST(ConnectionLimits, TcpClientsLeaveThePartKeptForTheUnixSocket) {
  ConnectionLimits l(ConnLimitOptions{.max_connections = 10, .max_tcp_connections = 6});
  size_t tcp = 0;
  for (unsigned uid = 1000; uid < 1010; ++uid) tcp += Hold(l, Loopback(uid), 1);
  EXPECT_EQ(tcp, 6u);
  EXPECT_EQ(l.Admit(Loopback(2000)), Admission::kReject);
  EXPECT_EQ(Hold(l, Unix(1001), 10), 4u);  // the socket's part
  EXPECT_EQ(l.served(), 10u);
}

TEST(ConnectionLimits, SlotsAreKeptForClientsHoldingNone) {
  ConnectionLimits l(
      ConnLimitOptions{.max_connections = 10, .max_tcp_connections = 8, .newcomer_connections = 2});
  // Two users below their own limit of 5 take what they may of the TCP pool.
  EXPECT_EQ(Hold(l, Loopback(1001, 5), 5), 5u);
  EXPECT_EQ(Hold(l, Loopback(1002, 5), 5), 1u);  // 6 of 8: the last 2 are kept
  // A user holding none still gets in, on TCP and on the socket.
  EXPECT_EQ(l.Admit(Loopback(1003, 5)), Admission::kServe);
  EXPECT_EQ(l.Admit(Unix(1004, 5)), Admission::kServe);
  // ... but not a second time while the pool is that full.
  EXPECT_EQ(l.Admit(Loopback(1003, 5)), Admission::kReject);
}

TEST(ConnectionLimits, ReservedClientsHaveNoLimitOfTheirOwnAndUseTheReserve) {
  ConnectionLimits l(
      ConnLimitOptions{.max_connections = 2, .newcomer_connections = 1, .reserved_connections = 1});
  EXPECT_EQ(Hold(l, Unix(1001, 1), 1), 1u);
  EXPECT_EQ(Hold(l, Unix(1002, 1), 1), 1u);
  EXPECT_EQ(l.Admit(Unix(1003, 1)), Admission::kReject);
  EXPECT_EQ(Hold(l, Unix(0, 1, true), 3), 1u);  // the reserve, bounded too
}

TEST(ConnectionLimits, RefusalsBeyondThoseInFlightAreDropped) {
  ConnectionLimits l(ConnLimitOptions{.max_connections = 1, .max_refusing = 2});
  EXPECT_EQ(l.Admit(Unix(1001)), Admission::kServe);
  EXPECT_EQ(l.Admit(Unix(1002)), Admission::kReject);
  EXPECT_EQ(l.Admit(Unix(1002)), Admission::kReject);
  EXPECT_EQ(l.Admit(Unix(1002)), Admission::kDrop);
  l.Release(Unix(1002), false);
  EXPECT_EQ(l.Admit(Unix(1002)), Admission::kReject);
  EXPECT_EQ(l.served(), 1u);
}

TEST(ConnectionLimits, RefusalsAreReportedAtMostOncePerIntervalWithTheirCount) {
  ConnectionLimits l(ConnLimitOptions{.max_connections = 1, .refusal_log_interval_ms = 1000});
  auto first = l.NoteRefusal(Loopback(1001, 3), Admission::kRejectClient, 5000);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->refused, 1u);
  EXPECT_EQ(first->key, "loopback uid 1001");
  EXPECT_EQ(first->limit, 3u);
  for (int i = 0; i < 50; ++i) {
    EXPECT_FALSE(l.NoteRefusal(Loopback(1001, 3), Admission::kRejectClient, 5100 + i));
  }
  auto next = l.NoteRefusal(Unix(1002), Admission::kReject, 6000);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->refused, 51u);  // the ones left out, and this one
  EXPECT_EQ(next->key, "uid 1002");
  EXPECT_EQ(next->why, Admission::kReject);
}

}  // namespace
}  // namespace lathe::net
