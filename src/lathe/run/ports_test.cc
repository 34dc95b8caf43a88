#include "lathe/run/ports.h"

#include <gtest/gtest.h>

#include "lathe/common/i18n.h"

namespace lathe::run {
namespace {

os::Listener Tcp(std::string host, int port, uid_t uid, uint64_t inode = 1) {
  os::Listener l;
  l.host = std::move(host);
  l.port = port;
  l.uid = uid;
  l.inode = inode;
  return l;
}

TEST(Ports, TheEnvironmentNamesEachPortByNumberNameAndTheMainOne) {
  std::vector<PortSpec> ports = {
      {"p6006", 6006, ""}, {"api", 8080, ""}, {"web", 0, "/home/u/web.sock"}};
  auto env = PortEnvironment(ports, {41234, 41235, 0});
  EXPECT_EQ(env.at("LATHE_PORT_6006"), "41234");
  EXPECT_EQ(env.at("PORT"), "41234");  // the first port is the main one
  EXPECT_EQ(env.at("LATHE_PORT_8080"), "41235");
  EXPECT_EQ(env.at("LATHE_PORT_API"), "41235");
  EXPECT_EQ(env.at("LATHE_SOCKET_WEB"), "/home/u/web.sock");
  EXPECT_EQ(env.count("LATHE_PORT_P6006"), 0u);  // a bare port has no name of its own
  EXPECT_EQ(env.size(), 5u);
  // A socket first: no PORT.
  EXPECT_EQ(PortEnvironment({ports[2], ports[0]}, {0, 6006}).count("PORT"), 0u);
  EXPECT_EQ(PortEnvName(ports[0]), "LATHE_PORT_6006");
  EXPECT_EQ(PortEnvName(ports[2]), "LATHE_SOCKET_WEB");
}

TEST(Ports, EachLayerIsToldApart) {
  const uid_t me = 1001, other = 1002;
  const std::string at = "127.0.0.1:41234";
  // Nothing of the run listens, nothing else either.
  auto c = CheckPort("tcp", at, me, me, {}, {});
  EXPECT_EQ(c.state, PortState::kNotListening);
  // The run listens on the declared port on every interface instead.
  std::vector<os::Listener> run = {Tcp("0.0.0.0", 6006, me), Tcp("::1", 41234, me, 2)};
  c = CheckPort("tcp", at, me, me, run, run);
  EXPECT_EQ(c.state, PortState::kElsewhere);
  EXPECT_EQ(c.run_listens, (std::vector<std::string>{"0.0.0.0:6006", "[::1]:41234"}));
  // On the right port: 127.0.0.1, 0.0.0.0 and :: all answer 127.0.0.1.
  for (const char* host : {"127.0.0.1", "0.0.0.0", "::"}) {
    std::vector<os::Listener> ok = {Tcp(host, 41234, me)};
    EXPECT_EQ(CheckPort("tcp", at, me, me, ok, ok).state, PortState::kListening) << host;
  }
  // Another user's process holds the address.
  std::vector<os::Listener> all = {Tcp("127.0.0.1", 41234, other, 9)};
  c = CheckPort("tcp", at, me, me, {}, all);
  EXPECT_EQ(c.state, PortState::kWrongOwner);
  EXPECT_EQ(c.other_uid, other);
  // ...which a root run refuses too, unless it is the daemon's user's; the
  // user's own other process serves it.
  EXPECT_EQ(CheckPort("tcp", at, 0, 0, {}, all).state, PortState::kWrongOwner);
  EXPECT_EQ(CheckPort("tcp", at, 0, other, {}, all).state, PortState::kListening);
  EXPECT_EQ(CheckPort("tcp", at, other, other, {}, all).state, PortState::kListening);
  // A unix socket by its path.
  os::Listener u;
  u.kind = os::Listener::Kind::kUnix;
  u.path = "/home/u/web.sock";
  EXPECT_EQ(CheckPort("unix", "/home/u/web.sock", me, me, {u}, {u}).state, PortState::kListening);
  EXPECT_EQ(CheckPort("unix", "/home/u/other.sock", me, me, {u}, {u}).state, PortState::kElsewhere);
}

TEST(Ports, TheExplanationNamesWhatTheRunListensOnAndTheVariable) {
  PortSpec p{"p6006", 6006, ""};
  PortCheck c;
  c.state = PortState::kElsewhere;
  c.run_listens = {"0.0.0.0:6006"};
  Status s = ExplainPort("r1", p, "127.0.0.1:41234", c);
  EXPECT_EQ(s.msg_id(), "ports.elsewhere");
  EXPECT_TRUE(s.IsUnavailable());
  EXPECT_NE(s.message().find("listens on 0.0.0.0:6006, not on 127.0.0.1:41234 ($LATHE_PORT_6006)"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find(kProxyCheckCommand), std::string::npos) << s.message();
  const std::string zh = Localize(s, Lang::kZh);
  EXPECT_NE(zh.find("0.0.0.0:6006"), std::string::npos) << zh;
  EXPECT_NE(zh, s.message());
  c.state = PortState::kNotListening;
  c.run_listens.clear();
  s = ExplainPort("r1", p, "127.0.0.1:41234", c);
  EXPECT_EQ(s.msg_id(), "ports.not_listening");
  EXPECT_NE(s.message().find("nothing listens on 127.0.0.1:41234"), std::string::npos);
  c.state = PortState::kWrongOwner;
  c.other_uid = 1002;
  s = ExplainPort("r1", p, "127.0.0.1:41234", c);
  EXPECT_TRUE(s.IsPermissionDenied());
  EXPECT_NE(s.message().find("uid 1002"), std::string::npos);
  c.state = PortState::kListening;
  EXPECT_TRUE(ExplainPort("r1", p, "127.0.0.1:41234", c).ok());
  s = ExplainNotRunning("r1", p, "queued");
  EXPECT_EQ(s.msg_id(), "ports.not_running");
  EXPECT_NE(s.message().find("is queued"), std::string::npos);
}

}  // namespace
}  // namespace lathe::run
