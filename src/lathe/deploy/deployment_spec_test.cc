#include "lathe/deploy/deployment_spec.h"

#include <gtest/gtest.h>

#include "lathe/common/i18n.h"

namespace lathe::deploy {
namespace {

Json Command() {
  return Json{{"name", "web"},
              {"command", {"python3", "-m", "http.server"}},
              {"port", 8000},
              {"ready", "/health"},
              {"env", {{"MODE", "fast"}}},
              {"workdir", "/srv"},
              {"replicas", 2}};
}

// A message's English and Chinese texts both name `word`.
void ExpectNames(const Status& s, const std::string& word) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(Localize(s, Lang::kEn).find(word), std::string::npos) << Localize(s, Lang::kEn);
  EXPECT_NE(Localize(s, Lang::kZh).find(word), std::string::npos) << Localize(s, Lang::kZh);
}

TEST(DeploymentSpec, ACommandDeploymentRoundTrips) {
  auto s = DeploymentSpecFromJson(Command());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->is_command());
  EXPECT_EQ(s->command, (std::vector<std::string>{"python3", "-m", "http.server"}));
  EXPECT_EQ(s->port, 8000);
  EXPECT_EQ(s->ready, "/health");
  EXPECT_EQ(s->env.at("MODE"), "fast");
  EXPECT_EQ(s->workdir, "/srv");
  EXPECT_EQ(s->min_replicas, 2);
  s->revision = 3;
  EXPECT_EQ(s->revision_version(), "rev-3");
  Json j = DeploymentSpecToJson(*s);
  EXPECT_FALSE(j.contains("model"));
  auto back = DeploymentSpecFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << " " << j.dump();
  EXPECT_EQ(DeploymentSpecToJson(*back), j);
  EXPECT_EQ(back->revision, 3);
  // What makes the revision: the ready path is not part of it.
  DeploymentSpec other = *back;
  other.ready = "/";
  EXPECT_EQ(RevisionToJson(other), RevisionToJson(*back));
  other.command.push_back("9000");
  EXPECT_NE(RevisionToJson(other), RevisionToJson(*back));
  DeploymentSpec restored;
  ASSERT_TRUE(RevisionFromJson(RevisionToJson(*back), restored).ok());
  EXPECT_EQ(restored.command, back->command);
  EXPECT_EQ(restored.env, back->env);
  EXPECT_EQ(restored.workdir, back->workdir);
  EXPECT_EQ(restored.port, 8000);
}

// An image is part of a revision: another image (or the same name's new
// id) is another revision; a model deployment's replica is Lathe's own
// server, which never runs in an image.
TEST(DeploymentSpec, AnImageIsPartOfACommandsRevisionAndNeverAModels) {
  Json j = Command();
  j["image"] = "web";
  j["image_id"] = std::string(64, 'a');
  auto s = DeploymentSpecFromJson(j);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->image, "web");
  EXPECT_EQ(s->image_id, std::string(64, 'a'));
  auto back = DeploymentSpecFromJson(DeploymentSpecToJson(*s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->image_id, s->image_id);
  DeploymentSpec restored;
  ASSERT_TRUE(RevisionFromJson(RevisionToJson(*s), restored).ok());
  EXPECT_EQ(restored.image, "web");
  EXPECT_EQ(restored.image_id, s->image_id);
  DeploymentSpec moved = *s;
  moved.image_id = std::string(64, 'c');
  EXPECT_NE(RevisionToJson(moved), RevisionToJson(*s));
  j["image_id"] = "nothex";
  EXPECT_FALSE(DeploymentSpecFromJson(j).ok());
  auto model = DeploymentSpecFromJson(Json{{"name", "m"}, {"model", "digits/3"}, {"image", "x"}});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().ToString().find("'image'"), std::string::npos)
      << model.status().ToString();
}

TEST(DeploymentSpec, AModelDeploymentHasNoCommandFields) {
  auto s = DeploymentSpecFromJson(Json{{"name", "m"}, {"model", "digits/3"}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(s->is_command());
  Json j = DeploymentSpecToJson(*s);
  EXPECT_EQ(j["model"], "digits/3");
  for (const char* f : {"command", "port", "ready", "revision"}) EXPECT_FALSE(j.contains(f)) << f;
}

TEST(DeploymentSpec, BadCommandDeploymentsNameTheField) {
  Json both = Command();
  both["model"] = "digits/3";
  ExpectNames(DeploymentSpecFromJson(both).status(), "model");
  ExpectNames(DeploymentSpecFromJson(both).status(), "command");
  ExpectNames(DeploymentSpecFromJson(Json{{"name", "x"}}).status(), "command");
  Json no_port = Command();
  no_port.erase("port");
  ExpectNames(DeploymentSpecFromJson(no_port).status(), "port");
  for (Json bad : {Json(0), Json(65536), Json("80")}) {
    Json j = Command();
    j["port"] = bad;
    ExpectNames(DeploymentSpecFromJson(j).status(), "port");
  }
  Json ready = Command();
  ready["ready"] = "health";
  ExpectNames(DeploymentSpecFromJson(ready).status(), "ready");
  Json empty = Command();
  empty["command"] = Json::array();
  ExpectNames(DeploymentSpecFromJson(empty).status(), "command");
  Json env = Command();
  env["env"] = {{"1BAD", "x"}};
  ExpectNames(DeploymentSpecFromJson(env).status(), "1BAD");
  Json relative = Command();
  relative["workdir"] = "srv";
  ExpectNames(DeploymentSpecFromJson(relative).status(), "workdir");
  // A model deployment with a command's field.
  ExpectNames(
      DeploymentSpecFromJson(Json{{"name", "m"}, {"model", "digits/3"}, {"port", 8000}}).status(),
      "port");
}

Json Model() { return Json{{"name", "m"}, {"model", "digits@prod"}}; }

TEST(DeploymentSpec, AModelDeploymentRoundTripsWithItsScalingAndBatching) {
  Json j = Model();
  j["autoscale"] = {{"min", 0},
                    {"max", 4},
                    {"target", 3},
                    {"upscale_delay", "5s"},
                    {"downscale_delay", "2m"},
                    {"zero_grace", "10s"}};
  j["batching"] = {{"max_batch_size", 8}, {"max_queue_delay", "2ms"}};
  j["canary"] = "10%";
  j["gpus"] = 1;
  j["priority"] = "low";
  auto s = DeploymentSpecFromJson(j);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->autoscaled());
  EXPECT_EQ(s->min_replicas, 0);
  EXPECT_EQ(s->upscale_delay_ms, 5000);
  EXPECT_EQ(s->downscale_delay_ms, 120000);
  EXPECT_EQ(s->max_batch_size, 8);
  EXPECT_EQ(s->max_queue_delay_us, 2000);
  EXPECT_EQ(s->canary_percent, 10);
  EXPECT_EQ(s->resources.gpus, 1);
  auto back = DeploymentSpecFromJson(DeploymentSpecToJson(*s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(DeploymentSpecToJson(*back), DeploymentSpecToJson(*s));
}

TEST(DeploymentSpec, BadModelDeploymentsNameTheField) {
  auto with = [](const char* key, Json v) {
    Json j = Model();
    j[key] = std::move(v);
    return DeploymentSpecFromJson(j).status();
  };
  ExpectNames(with("replicas", 0), "replicas");
  ExpectNames(with("replicas", 65), "replicas");
  ExpectNames(with("autoscale", Json{{"min", 3}, {"max", 1}}), "autoscale");
  ExpectNames(with("autoscale", Json{{"min", 1}}), "autoscale.max");
  ExpectNames(with("autoscale", Json{{"max", 2}, {"target", 0}}), "autoscale.target");
  ExpectNames(with("canary", "150%"), "canary");
  ExpectNames(with("batching", Json{{"max_batch_size", 99999}}), "batching.max_batch_size");
  ExpectNames(with("batching", Json{{"max_batch_size", 4}, {"max_queue_delay", "1h"}}),
              "batching.max_queue_delay");
  ExpectNames(with("batching", Json{{"size", 4}}), "batching.size");
  ExpectNames(with("colour", "blue"), "colour");
  ExpectNames(with("model", "digits"), "model");  // a model, not a version
  Json both = Model();
  both["replicas"] = 2;
  both["autoscale"] = {{"min", 1}, {"max", 2}};
  ExpectNames(DeploymentSpecFromJson(both).status(), "autoscale");
  ExpectNames(DeploymentSpecFromJson(Json{{"model", "digits/1"}}).status(), "name");
}

TEST(DeploymentSpec, ADeviceIsCpuOrCudaAndOnlyAModelDeployments) {
  auto with = [](Json v) {
    Json j = Model();
    j["device"] = std::move(v);
    return DeploymentSpecFromJson(j);
  };
  auto cpu = with("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_EQ(cpu->device_index(), -1);
  auto cuda = with("cuda:01");
  ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
  EXPECT_EQ(cuda->device, "cuda:1");
  EXPECT_EQ(cuda->device_index(), 1);
  EXPECT_EQ(DeploymentSpecToJson(*cuda)["device"], "cuda:1");
  EXPECT_EQ(DeploymentSpecFromJson(DeploymentSpecToJson(*cuda))->device, "cuda:1");
  EXPECT_FALSE(DeploymentSpecToJson(*DeploymentSpecFromJson(Model())).contains("device"));
  for (Json bad : {Json("gpu"), Json("cuda:"), Json("cuda:x"), Json("cuda:1000"), Json(0)}) {
    ExpectNames(with(bad).status(), "device");
    EXPECT_EQ(with(bad).status().msg_id(), "deploy.bad_device") << bad.dump();
  }
  Json command = Command();
  command["device"] = "cuda:0";
  ExpectNames(DeploymentSpecFromJson(command).status(), "device");
}

TEST(DeploymentSpec, ACudaDeviceTheMachineCannotGiveIsRefused) {
  auto spec = [](const char* device, int gpus) {
    Json j = Model();
    j["device"] = device;
    j["gpus"] = gpus;
    auto s = DeploymentSpecFromJson(j);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return *s;
  };
  // cuda:3 on a machine of 2 GPUs, whatever the replicas ask for.
  Status s = CheckDevice(spec("cuda:3", 2), 2);
  ExpectNames(s, "device");
  ExpectNames(s, "cuda:3");
  EXPECT_EQ(s.msg_id(), "deploy.device_no_gpu");
  ExpectNames(s, "cpu, cuda:0..cuda:1");
  // A cuda device for replicas without a GPU.
  s = CheckDevice(spec("cuda:0", 0), 2);
  ExpectNames(s, "device");
  ExpectNames(s, "gpus: 0");
  EXPECT_EQ(s.msg_id(), "deploy.device_needs_gpu");
  // cuda:N counts the replica's own GPUs: one each is cuda:0 only.
  EXPECT_EQ(CheckDevice(spec("cuda:1", 1), 4).msg_id(), "deploy.device_no_gpu");
  EXPECT_TRUE(CheckDevice(spec("cuda:1", 2), 2).ok());
  EXPECT_TRUE(CheckDevice(spec("cuda:0", 1), 1).ok());
  EXPECT_TRUE(CheckDevice(spec("cpu", 0), 0).ok());
  EXPECT_TRUE(CheckDevice(*DeploymentSpecFromJson(Model()), 0).ok());
}

}  // namespace
}  // namespace lathe::deploy
