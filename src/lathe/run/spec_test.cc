#include "lathe/run/spec.h"

#include <gtest/gtest.h>

namespace lathe::run {
namespace {

Result<RunSpec> Parse(const char* json) { return SpecFromJson(Json::parse(json)); }

TEST(Spec, FullSpecParses) {
  auto s = Parse(R"({"type":"job","name":"train-1","command":["python3","train.py"],"gpus":2,
      "cpus":1.5,"memory":"16GB","shm":"8Gi","priority":"high","env":{"A":"1","B":2},
      "workdir":"/data","retry":3,"max_duration":"12h","requeue":false,"preemptible":false})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->gpus, 2);
  EXPECT_DOUBLE_EQ(s->cpus, 1.5);
  EXPECT_EQ(s->memory_bytes, 16'000'000'000ull);
  EXPECT_EQ(s->shm_bytes, 8ull << 30);
  EXPECT_EQ(s->priority, Priority::kHigh);
  EXPECT_EQ(s->env.at("B"), "2");
  EXPECT_EQ(s->max_duration_ms, 12LL * 3600 * 1000);
  EXPECT_FALSE(s->requeue);
  EXPECT_FALSE(s->preemptible);
}

TEST(Spec, RoundTripsThroughJson) {
  auto s = Parse(R"({"command":["a"],"gpus":1,"memory":"1Gi","max_duration":"90s","name":"x"})");
  ASSERT_TRUE(s.ok());
  auto back = SpecFromJson(SpecToJson(*s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->memory_bytes, 1ull << 30);
  EXPECT_EQ(back->max_duration_ms, 90'000);
  EXPECT_EQ(back->name, "x");
  EXPECT_EQ(back->command, s->command);
}

TEST(Spec, PortsParseWithDefaultNamesAndRoundTrip) {
  auto s = Parse(R"({"command":["a"],"ports":[8888,{"name":"tb","port":6006},
      {"name":"web","socket":"/home/u/web.sock"}]})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->ports.size(), 3u);
  EXPECT_EQ(s->ports[0], (PortSpec{"p8888", 8888, ""}));
  EXPECT_EQ(s->ports[1], (PortSpec{"tb", 6006, ""}));
  EXPECT_EQ(s->ports[2], (PortSpec{"web", 0, "/home/u/web.sock"}));
  auto back = SpecFromJson(SpecToJson(*s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ports, s->ports);
}

TEST(Spec, NetworkIsHostUnlessIsolatedAndRoundTrips) {
  auto plain = Parse(R"({"command":["a"],"ports":[8888]})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->network, Network::kHost);
  EXPECT_FALSE(SpecToJson(*plain).contains("network"));
  auto iso = Parse(R"({"command":["a"],"ports":[8888],"network":"isolated"})");
  ASSERT_TRUE(iso.ok()) << iso.status().ToString();
  EXPECT_EQ(iso->network, Network::kIsolated);
  EXPECT_EQ(SpecToJson(*iso)["network"], "isolated");
  auto back = SpecFromJson(SpecToJson(*iso));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *iso);
  EXPECT_EQ(Parse(R"({"command":["a"],"network":"host"})")->network, Network::kHost);
}

TEST(Spec, NodesTorchrunAndNcclParseAndRoundTrip) {
  auto plain = Parse(R"({"command":["a"]})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->nodes, 1);
  EXPECT_FALSE(plain->torchrun);
  EXPECT_FALSE(plain->nccl_ib.has_value());
  EXPECT_TRUE(NcclEnv(*plain).empty());  // NCCL's own choice
  EXPECT_FALSE(SpecToJson(*plain).contains("nodes"));
  EXPECT_FALSE(SpecToJson(*plain).contains("nccl"));

  auto s = Parse(R"({"command":["train.py"],"gpus":4,"nodes":2,"torchrun":true,)"
                 R"("nccl":{"ib":false,"socket_ifname":"enp1s0f0.100"}})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->nodes, 2);
  EXPECT_TRUE(s->torchrun);
  ASSERT_TRUE(s->nccl_ib.has_value());
  EXPECT_FALSE(*s->nccl_ib);
  EXPECT_EQ(s->nccl_socket_ifname, "enp1s0f0.100");
  EXPECT_EQ(NcclEnv(*s), (std::map<std::string, std::string>{
                             {"NCCL_IB_DISABLE", "1"}, {"NCCL_SOCKET_IFNAME", "enp1s0f0.100"}}));
  auto back = SpecFromJson(SpecToJson(*s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *s);

  auto ib = Parse(R"({"command":["a"],"nccl":{"ib":true}})");
  ASSERT_TRUE(ib.ok());
  EXPECT_EQ(NcclEnv(*ib), (std::map<std::string, std::string>{{"NCCL_IB_DISABLE", "0"}}));
  auto again = SpecFromJson(SpecToJson(*ib));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *ib);
}

TEST(Spec, PortNamesAreDnsLabelParts) {
  EXPECT_TRUE(ValidPortName("tb"));
  EXPECT_TRUE(ValidPortName("p8888"));
  EXPECT_TRUE(ValidPortName("abcdefghijklmno"));    // 15
  EXPECT_FALSE(ValidPortName("abcdefghijklmnop"));  // 16
  EXPECT_FALSE(ValidPortName("8888"));
  EXPECT_FALSE(ValidPortName("a-b"));
  EXPECT_FALSE(ValidPortName("a.b"));
  EXPECT_FALSE(ValidPortName(""));
}

struct BadCase {
  const char* json;
  const char* field;  // must appear in the English message
  const char* id;
};

TEST(Spec, BadInputNamesTheField) {
  const BadCase cases[] = {
      {R"({"command":["a"],"gpu":1})", "gpu", "spec.unknown_field"},
      {R"({"command":["a"],"gpus":-1})", "gpus", "spec.bad_int"},
      {R"({"command":["a"],"gpus":"two"})", "gpus", "spec.bad_int"},
      {R"({"command":["a"],"gpus":1.5})", "gpus", "spec.bad_int"},
      {R"({"command":["a"],"memory":"16X"})", "memory", "spec.bad_size"},
      {R"({"command":["a"],"shm":true})", "shm", "spec.bad_size"},
      {R"({"command":["a"],"cpus":0})", "cpus", "spec.bad_cpus"},
      {R"({"command":["a"],"priority":"urgent"})", "priority", "spec.bad_priority"},
      {R"({"command":["a"],"max_duration":"soon"})", "max_duration", "spec.bad_duration"},
      {R"({"command":["a"],"workdir":"rel/path"})", "workdir", "spec.bad_workdir"},
      {R"({"command":["a"],"env":{"1BAD":"x"}})", "1BAD", "spec.bad_env"},
      {R"({"command":["a"],"name":"bad name"})", "name", "spec.bad_name"},
      {R"({"command":["a"],"type":"server"})", "type", "spec.bad_type"},
      {R"({"command":["a"],"type":"service"})", "deployment", "spec.service_deployment"},
      {R"({"command":["a"],"deployment":{"name":"d"}})", "deployment", "spec.service_deployment"},
      {R"({"command":["a"],"type":"service","deployment":{"name":"d","x":"y"}})", "deployment.x",
       "spec.wrong_type"},
      {R"({"command":"a"})", "command", "spec.wrong_type"},
      {R"({"gpus":1})", "command", "spec.missing_command"},
      {R"({"command":[]})", "command", "spec.missing_command"},
      {R"({"command":["a"],"retry":-2})", "retry", "spec.bad_int"},
      {R"({"command":["a"],"retry":101})", "retry", "spec.bad_int"},
      {R"({"command":["a"],"requeue":"yes"})", "requeue", "spec.wrong_type"},
      {R"({"command":["a"],"checkpoints":"ckpt"})", "checkpoints", "spec.wrong_type"},
      {R"({"command":["a"],"checkpoints":{"keep":2}})", "checkpoints", "spec.checkpoints_no_dir"},
      {R"({"command":["a"],"checkpoints":{"dir":"/c","keep":-1}})", "checkpoints.keep",
       "spec.bad_int"},
      {R"({"command":["a"],"checkpoints":{"dir":"/c","every":1}})", "checkpoints.every",
       "spec.unknown_field"},
      {R"({"command":["a"],"checkpoints":{"dir":"rel"}})", "checkpoints.dir",
       "spec.relative_checkpoint_dir"},
      {R"({"command":["a"],"resume_from":3})", "resume_from", "spec.wrong_type"},
      {R"({"command":["a"],"ports":8888})", "ports", "spec.wrong_type"},
      {R"({"command":["a"],"ports":[0]})", "ports[0]", "spec.bad_int"},
      {R"({"command":["a"],"ports":[80,70000]})", "ports[1]", "spec.bad_int"},
      {R"({"command":["a"],"ports":[{"name":"Web","port":80}]})", "ports[0].name",
       "spec.bad_port_name"},
      {R"({"command":["a"],"ports":[{"name":"w","socket":"rel.sock"}]})", "ports[0].socket",
       "spec.bad_port_socket"},
      {R"({"command":["a"],"ports":[{"name":"w","port":1,"socket":"/s"}]})", "ports[0]",
       "spec.port_needs_one"},
      {R"({"command":["a"],"ports":[{"socket":"/s"}]})", "ports[0]", "spec.port_needs_name"},
      {R"({"command":["a"],"ports":[{"name":"w","host":"0.0.0.0"}]})", "ports[0].host",
       "spec.unknown_field"},
      {R"({"command":["a"],"ports":[80,{"name":"p80","port":81}]})", "p80", "spec.port_twice"},
      {R"({"command":["a"],"ports":[1,2,3,4,5,6,7,8,9]})", "8", "spec.too_many_ports"},
      {R"({"command":["a"],"network":"none"})", "network", "spec.bad_network"},
      {R"({"command":["a"],"network":true})", "network", "spec.bad_network"},
      {R"({"command":["a"],"nodes":0})", "nodes", "spec.bad_int"},
      {R"({"command":["a"],"nodes":"two"})", "nodes", "spec.bad_int"},
      {R"({"command":["a"],"nodes":1025})", "nodes", "spec.bad_int"},
      {R"({"command":["a"],"torchrun":"yes"})", "torchrun", "spec.wrong_type"},
      {R"({"type":"notebook","torchrun":true})", "torchrun", "spec.torchrun_job_only"},
      {R"({"command":["a"],"nccl":"eth0"})", "nccl", "spec.wrong_type"},
      {R"({"command":["a"],"nccl":{"ib":"no"}})", "nccl.ib", "spec.wrong_type"},
      {R"({"command":["a"],"nccl":{"socket_ifname":"eth0;reboot"}})", "nccl.socket_ifname",
       "spec.bad_ifname"},
      {R"({"command":["a"],"nccl":{"socket_ifname":"eth 0"}})", "nccl.socket_ifname",
       "spec.bad_ifname"},
      {R"({"command":["a"],"nccl":{"socket_ifname":""}})", "nccl.socket_ifname", "spec.bad_ifname"},
      {R"({"command":["a"],"nccl":{"socket_ifname":3}})", "nccl.socket_ifname", "spec.bad_ifname"},
      {R"({"command":["a"],"nccl":{"mtu":9000}})", "nccl.mtu", "spec.unknown_field"},
  };
  for (const auto& c : cases) {
    auto s = Parse(c.json);
    ASSERT_FALSE(s.ok()) << c.json;
    EXPECT_TRUE(s.status().IsInvalidArgument()) << c.json;
    EXPECT_EQ(s.status().msg_id(), c.id) << c.json;
    EXPECT_NE(s.status().message().find(c.field), std::string::npos)
        << c.json << " -> " << s.status().message();
  }
}

TEST(Spec, CheckpointsResolveAgainstWorkdirAndRoundTrip) {
  auto s =
      Parse(R"({"command":["a"],"workdir":"/data/exp","checkpoints":{"dir":"out/../ckpt/","keep":3},
      "resume_from":"first"})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->checkpoint_dir, "/data/exp/ckpt");
  EXPECT_EQ(s->keep_checkpoints, 3);
  EXPECT_EQ(s->resume_from, "first");
  auto back = SpecFromJson(SpecToJson(*s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->checkpoint_dir, "/data/exp/ckpt");
  EXPECT_EQ(back->keep_checkpoints, 3);
  EXPECT_EQ(back->resume_from, "first");
  auto none = Parse(R"({"command":["a"]})");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(SpecToJson(*none).contains("checkpoints"));
}

TEST(Spec, NulBytesAreRefusedNamingTheField) {
  struct Case {
    const char* json;
    const char* field;
  };
  for (const Case& c :
       {Case{R"({"command":["echo","a\u0000b"]})", "command[1]"},
        Case{R"({"command":["a\u0000"]})", "command[0]"},
        Case{R"({"command":["a"],"env":{"FOO":"x\u0000y"}})", "env.FOO"},
        Case{R"({"command":["a"],"env":{"F\u0000O":"x"}})", "env"},
        Case{R"({"command":["a"],"workdir":"/a\u0000b"})", "workdir"},
        Case{R"({"command":["a"],"name":"n\u0000"})", "name"},
        Case{R"({"command":["a"],"resume_from":"r\u0000"})", "resume_from"},
        Case{R"({"command":["a"],"checkpoints":{"dir":"/c\u0000d"}})", "checkpoints.dir"}}) {
    auto s = Parse(c.json);
    ASSERT_FALSE(s.ok()) << c.json;
    EXPECT_TRUE(s.status().IsInvalidArgument());
    EXPECT_EQ(s.status().msg_id(), "input.nul_byte") << c.json;
    EXPECT_NE(s.status().message().find(std::string("'") + c.field + "'"), std::string::npos)
        << c.json << " -> " << s.status().message();
  }
}

TEST(Spec, TextThatJsonCannotHoldIsRefusedNamingTheField) {
  // From argv or a YAML file: bytes that are not UTF-8 would make the
  // request to the daemon unserializable.
  auto s = SpecFromJson(Json{{"command", {"echo", "a\xff"}}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().msg_id(), "input.bad_utf8");
  EXPECT_NE(s.status().message().find("'command[1]'"), std::string::npos) << s.status().message();
  auto e = SpecFromJson(Json{{"command", {"a"}}, {"env", {{"A", "\xc3("}}}});
  EXPECT_EQ(e.status().msg_id(), "input.bad_utf8");
  EXPECT_TRUE(
      SpecFromJson(Json{{"command", {"echo", "h\xc3\xa9llo \xe4\xbd\xa0\xe5\xa5\xbd"}}}).ok());
  // A value quoted in an error may hold such bytes too (a list as `type`).
  auto y = YamlSpecToJson(
      "type: [ch\xff"
      "ec]\ncommand: [a]\n",
      "job.yaml");
  ASSERT_TRUE(y.ok());
  auto t = SpecFromJson(*y);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().msg_id(), "spec.bad_type");
}

TEST(Spec, PathsMustFitTheKernelsLimits) {
  std::string long_dir = "/" + std::string(5000, 'a');
  auto w = SpecFromJson(Json{{"command", {"a"}}, {"workdir", long_dir}});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().msg_id(), "path.too_long");
  EXPECT_NE(w.status().message().find("workdir"), std::string::npos);
  auto c = SpecFromJson(Json{
      {"command", {"a"}}, {"workdir", "/w"}, {"checkpoints", {{"dir", std::string(300, 'c')}}}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().msg_id(), "path.name_too_long");
  EXPECT_NE(c.status().message().find("checkpoints.dir"), std::string::npos);
}

TEST(Spec, RoundTripKeepsMillisecondsAndTrailingSlashes) {
  auto s = Parse(R"({"command":["a"],"max_duration":"1.5s","checkpoints":{"dir":"/c//"}})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->checkpoint_dir, "/c");
  auto back = SpecFromJson(SpecToJson(*s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->max_duration_ms, 1500);
  EXPECT_TRUE(*back == *s);
}

TEST(SpecJson, NumberOutOfRangeGetsTheFieldsOwnRule) {
  auto g = ParseSpecJson(R"({"command":["a"],"gpus":1e400})");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().msg_id(), "spec.bad_int");
  EXPECT_NE(g.status().message().find("'gpus'"), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("0 to 1024"), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("1e400"), std::string::npos) << g.status().message();
  auto k = ParseSpecJson(R"({"command":["a"],"checkpoints":{"dir":"/c","keep":-1e999}})");
  EXPECT_EQ(k.status().msg_id(), "spec.bad_int");
  EXPECT_NE(k.status().message().find("checkpoints.keep"), std::string::npos);
  EXPECT_EQ(ParseSpecJson(R"({"cpus":1e400,"command":["a"]})").status().msg_id(), "spec.bad_cpus");
  EXPECT_EQ(ParseSpecJson(R"({"memory":1e400,"command":["a"]})").status().msg_id(),
            "spec.bad_size");
  // A field whose rule a string would pass (an env value): the parser's own error.
  auto e = ParseSpecJson(R"({"command":["a"],"env":{"X":1e400}})");
  EXPECT_EQ(e.status().msg_id(), "json.number_out_of_range");
  EXPECT_NE(e.status().message().find("env.X"), std::string::npos);
  auto a = ParseSpecJson(R"({"command":["a",1e400]})");
  EXPECT_EQ(a.status().msg_id(), "json.number_out_of_range");
  EXPECT_NE(a.status().message().find("command[1]"), std::string::npos);
  EXPECT_TRUE(ParseSpecJson(R"({"command":["a"],"gpus":1})").ok());
}

TEST(SpecJson, DuplicateKeyIsRefused) {
  auto j = ParseSpecJson(R"({"command":["echo","one"],"command":["echo","two"]})");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().msg_id(), "json.duplicate_key");
  EXPECT_NE(j.status().message().find("command"), std::string::npos);
}

TEST(Spec, NotAnObject) {
  EXPECT_FALSE(SpecFromJson(Json::array()).ok());
  EXPECT_FALSE(SpecFromJson(Json("x")).ok());
}

TEST(YamlSpec, ConvertsTypesAndShellCommands) {
  auto j = YamlSpecToJson("type: job\ngpus: 2\nrequeue: false\ncommand: python3 train.py --lr 3\n",
                          "job.yaml");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["gpus"], 2);
  EXPECT_EQ((*j)["requeue"], false);
  EXPECT_EQ((*j)["command"][0], "/bin/sh");
  EXPECT_EQ((*j)["command"][2], "python3 train.py --lr 3");
  auto list =
      YamlSpecToJson("command: [python3, train.py, --epochs, 3, true]\nmemory: \"16\"\n", "j");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ((*list)["command"][3], "3");
  EXPECT_EQ((*list)["command"][4], "true");
  EXPECT_EQ((*list)["memory"], "16");  // quoted: stays a string
}

TEST(YamlSpec, BadYamlNamesTheFile) {
  auto j = YamlSpecToJson("command: [unclosed\n", "job.yaml");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("job.yaml"), std::string::npos);
  EXPECT_FALSE(YamlSpecToJson("- a\n- b\n", "job.yaml").ok());
}

TEST(YamlSpec, DuplicateKeyIsRefusedNamingIt) {
  auto j = YamlSpecToJson("type: job\ncommand: [echo, one]\ncommand: [echo, two]\n", "job.yaml");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().msg_id(), "yaml.duplicate_key");
  EXPECT_NE(j.status().message().find("'command'"), std::string::npos) << j.status().message();
  EXPECT_NE(j.status().message().find("job.yaml"), std::string::npos);
}

TEST(YamlSpec, BillionLaughsAndLargeFilesAreRefused) {
  // 397 bytes that expand to 9^9 strings.
  const char* laughs =
      "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
      "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
      "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
      "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
      "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";
  auto j = YamlSpecToJson(laughs, "laughs.yaml");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().msg_id(), "yaml.too_many_nodes");
  EXPECT_NE(j.status().message().find("laughs.yaml"), std::string::npos);
  std::string big(kMaxSpecFileBytes + 1, '#');
  auto b = YamlSpecToJson(big, "big.yaml");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().msg_id(), "spec.file_too_large");
  EXPECT_NE(b.status().message().find("1MiB"), std::string::npos) << b.status().message();
  EXPECT_TRUE(YamlSpecToJson("# " + std::string(kMaxSpecFileBytes - 20, 'x') + "\ncommand: [a]\n",
                             "ok.yaml")
                  .ok());
}

TEST(YamlSpec, NulAndHugeNumbersReachTheFieldChecks) {
  auto j = YamlSpecToJson("command: [\"echo\", \"a\\0b\"]\n", "job.yaml");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  auto s = SpecFromJson(*j);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("command[1]"), std::string::npos) << s.status().message();
  auto g = YamlSpecToJson("command: [a]\ngpus: 1e400\n", "job.yaml");
  ASSERT_TRUE(g.ok());
  auto gs = SpecFromJson(*g);
  ASSERT_FALSE(gs.ok());
  EXPECT_EQ(gs.status().msg_id(), "spec.bad_int");
  EXPECT_NE(gs.status().message().find("1e400"), std::string::npos) << gs.status().message();
}

}  // namespace
}  // namespace lathe::run

namespace lathe::run {
namespace {

std::string ArgOf(const Status& s, const std::string& key) {
  for (const auto& a : s.args())
    if (a.key == key) return a.value;
  return "<none>";
}

TEST(SpecSecrets, NamesParseAndRoundTrip) {
  auto s = Parse(R"({"command":["a"],"secrets":["HF_TOKEN","WANDB_API_KEY"]})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->secrets, (std::vector<std::string>{"HF_TOKEN", "WANDB_API_KEY"}));
  auto back = SpecFromJson(SpecToJson(*s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *s);
  // A spec without secrets keeps its canonical form (idempotency hashes).
  EXPECT_FALSE(SpecToJson(*Parse(R"({"command":["a"]})")).contains("secrets"));
}

TEST(SpecSecrets, BadListsNameTheField) {
  auto not_list = Parse(R"({"command":["a"],"secrets":"HF_TOKEN"})");
  ASSERT_FALSE(not_list.ok());
  EXPECT_EQ(ArgOf(not_list.status(), "field"), "secrets");
  auto bad = Parse(R"({"command":["a"],"secrets":["OK","1BAD"]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().msg_id(), "spec.bad_secret");
  EXPECT_EQ(ArgOf(bad.status(), "field"), "secrets[1]");
  EXPECT_EQ(Parse(R"({"command":["a"],"secrets":["LATHE_RUN_ID"]})").status().msg_id(),
            "spec.bad_secret");
  EXPECT_EQ(Parse(R"({"command":["a"],"secrets":["A-B"]})").status().msg_id(), "spec.bad_secret");
  EXPECT_EQ(Parse(R"({"command":["a"],"secrets":[3]})").status().msg_id(), "spec.wrong_type");
  EXPECT_EQ(Parse(R"({"command":["a"],"secrets":["A","A"]})").status().msg_id(),
            "spec.secret_twice");
  EXPECT_EQ(Parse(R"({"command":["a"],"env":{"A":"1"},"secrets":["A"]})").status().msg_id(),
            "spec.secret_in_env");
  Json many = {{"command", {"a"}}, {"secrets", Json::array()}};
  for (size_t i = 0; i <= kMaxSecretsPerRun; ++i)
    many["secrets"].push_back("S" + std::to_string(i));
  EXPECT_EQ(SpecFromJson(many).status().msg_id(), "spec.too_many_secrets");
}

TEST(SpecSecrets, SecretFilesParseRoundTripAndNameTheirField) {
  auto spec = Parse(R"({"command":["a"],"secrets":["A"],"secret_files":["HF_TOKEN","B"]})");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->secret_files, (std::vector<std::string>{"HF_TOKEN", "B"}));
  EXPECT_EQ(SecretNames(*spec), (std::vector<std::string>{"A", "HF_TOKEN", "B"}));
  Json j = SpecToJson(*spec);
  EXPECT_EQ(j["secret_files"], Json({"HF_TOKEN", "B"}));
  EXPECT_EQ(*SpecFromJson(j), *spec);
  EXPECT_FALSE(SpecToJson(*Parse(R"({"command":["a"]})")).contains("secret_files"));

  auto bad = Parse(R"({"command":["a"],"secret_files":["OK","1BAD"]})");
  EXPECT_EQ(bad.status().msg_id(), "spec.bad_secret");
  EXPECT_EQ(ArgOf(bad.status(), "field"), "secret_files[1]");
  auto twice = Parse(R"({"command":["a"],"secret_files":["A","A"]})");
  EXPECT_EQ(twice.status().msg_id(), "spec.secret_twice");
  EXPECT_EQ(ArgOf(twice.status(), "field"), "secret_files");
  auto not_list = Parse(R"({"command":["a"],"secret_files":"A"})");
  EXPECT_EQ(ArgOf(not_list.status(), "field"), "secret_files");
  auto both = Parse(R"({"command":["a"],"secrets":["A"],"secret_files":["A"]})");
  EXPECT_EQ(both.status().msg_id(), "spec.secret_file_and_env");
  EXPECT_NE(both.status().message().find("secret_files"), std::string::npos);
  // A file is not a variable: an env entry of the same name is the run's own.
  EXPECT_TRUE(Parse(R"({"command":["a"],"env":{"A":"1"},"secret_files":["A"]})").ok());
  Json many = {{"command", {"a"}}, {"secret_files", Json::array()}};
  for (size_t i = 0; i <= kMaxSecretsPerRun; ++i)
    many["secret_files"].push_back("S" + std::to_string(i));
  auto over = SpecFromJson(many);
  EXPECT_EQ(over.status().msg_id(), "spec.too_many_secrets");
  EXPECT_EQ(ArgOf(over.status(), "field"), "secret_files");
}

}  // namespace
}  // namespace lathe::run

namespace lathe::run {
namespace {

// A deployment's replica: type service with its deployment, kept through
// the canonical form.
TEST(Spec, ServiceReplicaRoundTrips) {
  auto s = SpecFromJson(
      Json{{"type", "service"},
           {"command", {"lathe", "serve"}},
           {"deployment", {{"name", "digits"}, {"version", "digits/3"}, {"socket", "/s/x.sock"}}}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(IsServiceSpec(*s));
  EXPECT_EQ(s->deployment, "digits");
  EXPECT_EQ(s->deployment_version, "digits/3");
  EXPECT_EQ(s->deployment_socket, "/s/x.sock");
  auto back = SpecFromJson(SpecToJson(*s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *s);
}

TEST(RunSpec, APoolIsANameKeptThroughJson) {
  auto s = Parse(R"({"command": ["x"], "pool": "gpu-a100"})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->pool, "gpu-a100");
  auto back = SpecFromJson(SpecToJson(*s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *s);
  EXPECT_FALSE(SpecToJson(*Parse(R"({"command": ["x"]})")).contains("pool"));
  for (const char* bad :
       {R"({"command": ["x"], "pool": "A"})", R"({"command": ["x"], "pool": ""})",
        R"({"command": ["x"], "pool": "1st"})", R"({"command": ["x"], "pool": 3})",
        R"({"command": ["x"], "pool": "a b"})"}) {
    auto r = Parse(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().msg_id(), "spec.wrong_type") << bad;
  }
}

TEST(RunSpec, TheTypeIsAKindCheckedAtParseTime) {
  EXPECT_EQ(Parse(R"({"type": "notebook"})")->type, RunKind::kNotebook);
  EXPECT_EQ(Parse(R"({"command": ["x"]})")->type, RunKind::kJob);
  auto bad = Parse(R"({"command": ["x"], "type": "cron"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().msg_id(), "spec.bad_type");
  EXPECT_EQ(SpecToJson(*Parse(R"({"type": "notebook"})"))["type"], "notebook");
}

}  // namespace
}  // namespace lathe::run

namespace lathe::run {
namespace {

TEST(Spec, ImageAndItsIdParseAndRoundTrip) {
  const std::string id(64, 'c');
  auto s = SpecFromJson(
      Json{{"command", {"python3"}}, {"image", "team/pytorch:2.1"}, {"image_id", "sha256:" + id}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->image, "team/pytorch:2.1");
  EXPECT_EQ(s->image_id, id);  // stored without its "sha256:"
  auto back = SpecFromJson(SpecToJson(*s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *s);
}

TEST(Spec, BadImagesNameTheField) {
  for (const Json& bad :
       {Json("-rf"), Json(""), Json(7), Json("a b"), Json(std::string(300, 'a'))}) {
    auto s = SpecFromJson(Json{{"command", {"true"}}, {"image", bad}});
    ASSERT_FALSE(s.ok()) << bad.dump();
    EXPECT_NE(s.status().ToString().find("image"), std::string::npos) << s.status().ToString();
  }
  auto s = SpecFromJson(Json{{"command", {"true"}}, {"image_id", "sha256:xyz"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().ToString().find("image_id"), std::string::npos);
  EXPECT_TRUE(ValidImageId(std::string(64, 'f')));
  EXPECT_FALSE(ValidImageId(std::string(64, 'F')));
  EXPECT_FALSE(ValidImageId(std::string(63, 'f')));
}

}  // namespace
}  // namespace lathe::run
