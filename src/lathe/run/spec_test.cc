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
  EXPECT_EQ(s->priority, kPriorityHigh);
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
      {R"({"command":["a"],"type":"notebook"})", "type", "spec.bad_type"},
      {R"({"command":"a"})", "command", "spec.wrong_type"},
      {R"({"gpus":1})", "command", "spec.missing_command"},
      {R"({"command":[]})", "command", "spec.missing_command"},
      {R"({"command":["a"],"retry":-2})", "retry", "spec.bad_int"},
      {R"({"command":["a"],"requeue":"yes"})", "requeue", "spec.wrong_type"},
      {R"({"command":["a"],"checkpoints":"ckpt"})", "checkpoints", "spec.wrong_type"},
      {R"({"command":["a"],"checkpoints":{"keep":2}})", "checkpoints", "spec.checkpoints_no_dir"},
      {R"({"command":["a"],"checkpoints":{"dir":"/c","keep":-1}})", "checkpoints.keep", "spec.bad_int"},
      {R"({"command":["a"],"checkpoints":{"dir":"/c","every":1}})", "checkpoints.every", "spec.unknown_field"},
      {R"({"command":["a"],"checkpoints":{"dir":"rel"}})", "checkpoints.dir", "spec.relative_checkpoint_dir"},
      {R"({"command":["a"],"resume_from":3})", "resume_from", "spec.wrong_type"},
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
  auto s = Parse(R"({"command":["a"],"workdir":"/data/exp","checkpoints":{"dir":"out/../ckpt/","keep":3},
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
  auto list = YamlSpecToJson("command: [python3, train.py, --epochs, 3, true]\nmemory: \"16\"\n", "j");
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

}  // namespace
}  // namespace lathe::run
