#include "lathe/serve/config.h"

#include <gtest/gtest.h>

#include "lathe/serve/repository.h"

namespace lathe::serve {
namespace {

constexpr const char* kFull = R"(
backend: torchscript
max_batch_size: 16
inputs:
  - {name: x, datatype: FP32, dims: [4]}
outputs:
  - {name: y, datatype: FP32, dims: [-1]}
dynamic_batching:
  max_queue_delay_us: 500
  preferred_batch_sizes: [8, 4]
  priority_levels: 3
  default_priority: 2
  queue: {max_size: 100, timeout_us: 2000, on_timeout: delay}
  priority_queues:
    1: {max_size: 10, on_timeout: reject}
instances: [{count: 2, device: cpu}, {count: 1, device: "cuda:1"}]
threads_per_instance: 2
version_policy: {latest: 2}
health_probe_interval: 5s
warmup:
  inputs:
    x: {data: [1, 2, 3, 4], shape: [1, 4]}
parameters: {anything: 1}
)";

TEST(Config, ParsesEveryField) {
  auto c = ParseModelConfig(kFull, "repo/mlp/config.yaml", "mlp");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->name, "mlp");
  EXPECT_EQ(c->backend, "torchscript");
  EXPECT_EQ(c->max_batch_size, 16);
  ASSERT_EQ(c->inputs.size(), 1u);
  EXPECT_EQ(c->inputs[0].datatype, DataType::kFp32);
  EXPECT_EQ(*c->inputs[0].dims, Shape({4}));
  EXPECT_TRUE(c->batching.enabled);
  EXPECT_EQ(c->batching.max_queue_delay_us, 500);
  EXPECT_EQ(c->batching.preferred_batch_sizes, std::vector<int>({4, 8}));
  ASSERT_EQ(c->batching.queues.size(), 3u);
  EXPECT_EQ(c->batching.queues[0].max_size, 10u);
  EXPECT_EQ(c->batching.queues[0].on_timeout, TimeoutAction::kReject);
  EXPECT_EQ(c->batching.queues[0].timeout_us, 2000);  // inherited from `queue`
  EXPECT_EQ(c->batching.queues[2].on_timeout, TimeoutAction::kDelay);
  ASSERT_EQ(c->instances.size(), 2u);
  EXPECT_EQ(c->instances[1].device, DeviceKind::kCuda);
  EXPECT_EQ(c->instances[1].device_index, 1);
  EXPECT_EQ(c->version_policy.latest, 2);
  EXPECT_EQ(c->health_probe_interval_ms, 5000);
  EXPECT_TRUE(c->warmup.is_object());
  // The canonical JSON round-trips through the parser.
  auto again = ModelConfigFromJson(ModelConfigToJson(*c), "x", "mlp");
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

TEST(Config, DefaultsAreSane) {
  auto c = ParseModelConfig("backend: process\n", "f.yaml", "m");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->batching.enabled);
  EXPECT_EQ(c->max_batch_size, 0);
  ASSERT_EQ(c->instances.size(), 1u);
  EXPECT_EQ(c->instances[0].device, DeviceKind::kCpu);
  EXPECT_EQ(c->batching.queues.size(), 3u);
  EXPECT_EQ(c->version_policy.kind, VersionPolicy::Kind::kLatest);
}

struct Bad {
  const char* yaml;
  const char* field;    // must appear in the message
  const char* allowed;  // must appear in the message ("" to skip)
};

class ConfigErrors : public ::testing::TestWithParam<Bad> {};

TEST_P(ConfigErrors, NameFileFieldAndAllowedValues) {
  auto c = ParseModelConfig(GetParam().yaml, "/repo/m/config.yaml", "m");
  ASSERT_FALSE(c.ok()) << GetParam().yaml;
  EXPECT_TRUE(c.status().IsInvalidArgument());
  const std::string& msg = c.status().message();
  EXPECT_NE(msg.find("/repo/m/config.yaml"), std::string::npos) << msg;
  EXPECT_NE(msg.find(GetParam().field), std::string::npos) << msg;
  EXPECT_NE(msg.find(GetParam().allowed), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    All, ConfigErrors,
    ::testing::Values(
        Bad{"backend: torchscript\nmax_batch: 3\n", "max_batch", "max_batch_size"},
        Bad{"max_batch_size: 3\n", "backend", ""},
        Bad{"backend: Torch Script\n", "backend", "torchscript, process"},
        Bad{"backend: torchscript\nmax_batch_size: -1\n", "max_batch_size", "from 0"},
        Bad{"backend: torchscript\nmax_batch_size: many\n", "max_batch_size", "integer"},
        Bad{"backend: torchscript\ninputs: [{name: x, datatype: FLOAT32}]\n", "inputs[0].datatype",
            "FP32"},
        Bad{"backend: torchscript\ninputs: [{name: x, datatype: FP32, dims: [0]}]\n",
            "inputs[0].dims[0]", "-1"},
        Bad{"backend: torchscript\ninputs: [{name: x, datatype: FP32}, {name: x, datatype: "
            "FP32}]\n",
            "inputs[1].name", ""},
        Bad{"backend: torchscript\ndynamic_batching: {max_queue_delay_us: 5}\n", "max_batch_size",
            "dynamic_batching"},
        Bad{"backend: torchscript\nmax_batch_size: 4\ndynamic_batching: {queue: {on_timeout: "
            "drop}}\n",
            "dynamic_batching.queue.on_timeout", "reject, delay"},
        Bad{"backend: torchscript\nmax_batch_size: 4\ndynamic_batching: {preferred_batch_sizes: "
            "[8]}\n",
            "preferred_batch_sizes[0]", "from 1 to 4"},
        Bad{"backend: torchscript\nmax_batch_size: 4\ndynamic_batching: {priority_levels: 2, "
            "priority_queues: {3: {}}}\n",
            "priority_queues.3", "from 1 to 2"},
        Bad{"backend: torchscript\nmax_batch_size: 4\ndynamic_batching: {max_queue_delay: 5}\n",
            "dynamic_batching.max_queue_delay", "max_queue_delay_us"},
        Bad{"backend: torchscript\ninstances: [{count: 1, device: gpu0}]\n", "instances[0].device",
            "cuda:N"},
        Bad{"backend: torchscript\ninstances: [{count: 0}]\n", "instances[0].count", "from 1"},
        Bad{"backend: torchscript\nversion_policy: {newest: 1}\n", "version_policy", "latest"},
        Bad{"backend: torchscript\nversion_policy: {latest: 1, all: true}\n", "version_policy",
            "{all: true}"},
        Bad{"backend: torchscript\nhealth_probe_interval: soon\n", "health_probe_interval", "10s"},
        Bad{"backend: torchscript\ninputs: [{name: x, datatype: FP32}]\nwarmup: {inputs: {z: "
            "{data: [1], shape: [1]}}}\n",
            "warmup.inputs.z", "x"},
        Bad{"backend: torchscript\nname: other\n", "name", "'m'"},
        Bad{"backend: [unclosed\n", "YAML", ""}));

TEST(Config, Priority) {
  BatchingConfig b;
  b.priority_levels = 5;
  b.default_priority = 3;
  EXPECT_EQ(ParsePriority("high", b), 1);
  EXPECT_EQ(ParsePriority("low", b), 5);
  EXPECT_EQ(ParsePriority("normal", b), 3);
  EXPECT_EQ(ParsePriority("4", b), 4);
  EXPECT_FALSE(ParsePriority("6", b));
  EXPECT_FALSE(ParsePriority("0", b));
  EXPECT_FALSE(ParsePriority("urgent", b));
}

TEST(Repository, SelectVersions) {
  VersionPolicy p;
  p.latest = 2;
  EXPECT_EQ(SelectVersions(p, {3, 1, 2}), std::vector<int64_t>({2, 3}));
  p.kind = VersionPolicy::Kind::kAll;
  EXPECT_EQ(SelectVersions(p, {3, 1}), std::vector<int64_t>({1, 3}));
  p.kind = VersionPolicy::Kind::kSpecific;
  p.versions = {1, 7};
  EXPECT_EQ(SelectVersions(p, {1, 2, 3}), std::vector<int64_t>({1}));
}

TEST(Repository, ModelFlagErrors) {
  EXPECT_TRUE(ModelFromFlag("noequals").status().IsInvalidArgument());
  EXPECT_TRUE(ModelFromFlag("bad name=/x").status().IsInvalidArgument());
  EXPECT_TRUE(ModelFromFlag("m=/does/not/exist.pt").status().IsNotFound());
}

}  // namespace
}  // namespace lathe::serve
