#include "lathe/daemon/config.h"

#include <gtest/gtest.h>

#include "lathe/common/i18n.h"

namespace lathe::daemon {
namespace {

TEST(DaemonConfig, ParsesKnownKeys) {
  auto c = ParseDaemonConfig("gpus: sim:4x24GB\nhost: 0.0.0.0\nport: 7731\ngrace: 30s\n", "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c->gpus, "sim:4x24GB");
  EXPECT_EQ(*c->host, "0.0.0.0");
  EXPECT_EQ(*c->port, 7731);
  EXPECT_EQ(*c->grace, "30s");
  auto empty = ParseDaemonConfig("", "c.yaml");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->gpus.has_value());
}

TEST(DaemonConfig, RejectsBadKeysAndValuesNamingThem) {
  for (const char* bad : {"gpu: sim:4\n", "port: 70000\n", "port: http\n", "grace: soon\n",
                          "gpus: [a, b]\n", "- a\n"}) {
    auto c = ParseDaemonConfig(bad, "c.yaml");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().msg_id(), "config.bad_key");
    EXPECT_NE(c.status().message().find("c.yaml"), std::string::npos);
  }
}

TEST(DaemonConfig, AKeyGivenTwiceIsRefusedNotTheLastOneTaken) {
  auto c = ParseDaemonConfig("quotas:\n  projects:\n    ml: {gpus: 1}\n    ml: {gpus: 2}\n",
                             "config.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().msg_id(), "yaml.duplicate_key");
  EXPECT_NE(c.status().message().find("'ml'"), std::string::npos) << c.status().ToString();
  EXPECT_FALSE(ParseDaemonConfig("port: 1\nport: 2\n", "config.yaml").ok());
}

TEST(DaemonConfig, YamlItCannotReadIsSaidInTheReadersLanguageWithTheLine) {
  auto c = ParseDaemonConfig("gpus: all\nport: 7731: 2\n", "config.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().msg_id(), "yaml.syntax.map_value");
  EXPECT_NE(Localize(c.status(), Lang::kEn).find("config.yaml: line 2, column"), std::string::npos)
      << Localize(c.status(), Lang::kEn);
  const std::string zh = Localize(c.status(), Lang::kZh);
  EXPECT_NE(zh.find("第 2 行"), std::string::npos) << zh;
  EXPECT_EQ(zh.find("illegal"), std::string::npos) << zh;
}

TEST(DaemonConfig, ParsesRetentionAndKeepsForeverByDefault) {
  auto c = ParseDaemonConfig("retention:\n  finished_runs: 30d\n  snapshots: true\n", "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->retention.has_value());
  EXPECT_EQ(c->retention->finished_runs_ms, 30LL * 24 * 3600 * 1000);
  EXPECT_TRUE(c->retention->snapshots);
  auto zero = ParseDaemonConfig("retention: {finished_runs: 0}\n", "c.yaml");
  ASSERT_TRUE(zero.ok()) << zero.status().ToString();
  EXPECT_EQ(zero->retention->finished_runs_ms, 0);
  EXPECT_FALSE(zero->retention->snapshots);
  EXPECT_EQ(RetentionPolicy{}.finished_runs_ms, 0);  // absent: keep forever
}

TEST(DaemonConfig, RejectsBadRetentionNamingTheKey) {
  for (auto [bad, key] :
       {std::pair{"retention: 30d\n", "retention"},
        std::pair{"retention: {finished_runs: soon}\n", "retention.finished_runs"},
        std::pair{"retention: {snapshots: maybe}\n", "retention.snapshots"},
        std::pair{"retention: {runs: 30d}\n", "retention.runs"}}) {
    auto c = ParseDaemonConfig(bad, "c.yaml");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().msg_id(), "config.bad_key");
    EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status().message();
  }
}

TEST(DaemonConfig, ParsesAllowedHostsAsAListOfNames) {
  auto c = ParseDaemonConfig("allowed_hosts: [lab.example.org, 10.0.0.5, '::5']\n", "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->allowed_hosts.has_value());
  EXPECT_EQ(*c->allowed_hosts, (std::vector<std::string>{"lab.example.org", "10.0.0.5", "::5"}));
  EXPECT_FALSE(ParseDaemonConfig("port: 1\n", "c.yaml")->allowed_hosts.has_value());
  for (const char* bad :
       {"allowed_hosts: lab.example.org\n", "allowed_hosts: [[a]]\n", "allowed_hosts: ['a b']\n",
        "allowed_hosts: ['http://a/']\n", "allowed_hosts: ['']\n"}) {
    auto b = ParseDaemonConfig(bad, "c.yaml");
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().msg_id(), "config.bad_key");
    EXPECT_NE(b.status().message().find("allowed_hosts"), std::string::npos) << bad;
  }
}

TEST(DaemonConfig, ParsesTlsAndRejectsBadTlsNamingTheKey) {
  auto c =
      ParseDaemonConfig("tls:\n  cert: /etc/l/server.pem\n  key: /etc/l/server.key\n", "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->tls.has_value());
  EXPECT_EQ(c->tls->cert, "/etc/l/server.pem");
  EXPECT_EQ(c->tls->key, "/etc/l/server.key");
  EXPECT_FALSE(ParseDaemonConfig("host: 0.0.0.0\n", "c.yaml")->tls.has_value());
  for (auto [bad, key] :
       {std::pair{"tls: /etc/l/server.pem\n", "tls"},
        std::pair{"tls: {cert: server.pem}\n", "tls.cert"},
        std::pair{"tls: {key: [a]}\n", "tls.key"}, std::pair{"tls: {ca: /x}\n", "tls.ca"}}) {
    auto r = ParseDaemonConfig(bad, "c.yaml");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().msg_id(), "config.bad_key");
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
  }
}

TEST(DaemonConfig, ParsesMetricsAndRejectsBadMetricsNamingTheKey) {
  auto c = ParseDaemonConfig("metrics: {open_on_loopback: true}\n", "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->metrics.has_value());
  EXPECT_EQ(c->metrics->open_on_loopback, true);
  auto off = ParseDaemonConfig("metrics: {open_on_loopback: false}\n", "c.yaml");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->metrics->open_on_loopback, false);
  EXPECT_FALSE(ParseDaemonConfig("gpus: none\n", "c.yaml")->metrics.has_value());
  for (const auto& [bad, key] : std::vector<std::pair<std::string, std::string>>{
           {"metrics: {open_on_loopback: maybe}\n", "metrics.open_on_loopback"},
           {"metrics: {open: true}\n", "metrics.open"},
           {"metrics: true\n", "metrics"}}) {
    auto r = ParseDaemonConfig(bad, "c.yaml");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().msg_id(), "config.bad_key");
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
  }
}

TEST(DaemonConfig, MissingFileIsEmpty) {
  auto c = LoadDaemonConfig("/nonexistent/lathe/config.yaml");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->port.has_value());
}

TEST(CompareWithRunning, NamesEachGivenSettingTheRunningDaemonLacks) {
  Json status = Json::parse(R"({"gpus": {"count": 0, "source": "none", "spec": "none"},
                                "tcp": "127.0.0.1:7731", "grace_ms": 10000})");
  DaemonConfig asked;
  asked.gpus = "sim:4x24GB";
  asked.port = 8000;
  asked.host = "127.0.0.1";
  asked.grace = "10s";
  auto diffs = CompareWithRunning(asked, status);
  ASSERT_EQ(diffs.size(), 2u);
  EXPECT_EQ(diffs[0].flag, "--gpus");
  EXPECT_EQ(diffs[0].asked, "sim:4x24GB");
  EXPECT_EQ(diffs[0].running, "none");
  EXPECT_EQ(diffs[1].flag, "--port");
  EXPECT_EQ(diffs[1].running, "7731");
  asked.grace = "30s";
  asked.host = "0.0.0.0";
  diffs = CompareWithRunning(asked, status);
  ASSERT_EQ(diffs.size(), 4u);
  EXPECT_EQ(diffs[1].flag, "--host");
  EXPECT_EQ(diffs[1].running, "127.0.0.1");
  EXPECT_EQ(diffs[2].flag, "--port");
  EXPECT_EQ(diffs[3].flag, "--grace");
  EXPECT_EQ(diffs[3].running, "10s");
}

TEST(CompareWithRunning, SameOrUnreportedSettingsAreNotMismatches) {
  Json status =
      Json::parse(R"({"gpus": {"spec": "sim:4x24GB"}, "tcp": "[::1]:7731", "grace_ms": 2000})");
  DaemonConfig asked;
  asked.gpus = "sim:4x24GB";
  asked.host = "::1";
  asked.port = 0;  // any free port
  asked.grace = "2s";
  EXPECT_TRUE(CompareWithRunning(asked, status).empty());
  EXPECT_TRUE(CompareWithRunning(DaemonConfig{}, status).empty());
  asked.gpus = "none";
  asked.grace = "5s";
  EXPECT_TRUE(CompareWithRunning(asked, Json::object()).empty());  // a daemon that reports neither
}

}  // namespace
}  // namespace lathe::daemon

namespace lathe::daemon {
namespace {

TEST(DaemonConfig, ParsesTelemetry) {
  auto c = ParseDaemonConfig(
      "telemetry:\n  enabled: false\n  interval: 200ms\n  max_size: 64MB\n  idle_pct: 3\n"
      "  idle_for: 2m\n  throttle_pct: 30\n  throttle_after: 1m\n",
      "config.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->telemetry);
  EXPECT_EQ(c->telemetry->enabled, false);
  EXPECT_EQ(c->telemetry->interval_ms, 200);
  EXPECT_EQ(c->telemetry->max_bytes, 64'000'000u);
  EXPECT_EQ(c->telemetry->idle_pct, 3);
  EXPECT_EQ(c->telemetry->idle_ms, 120'000);
  EXPECT_EQ(c->telemetry->throttle_pct, 30);
  EXPECT_EQ(c->telemetry->throttle_ms, 60'000);
}

TEST(DaemonConfig, RejectsBadTelemetryNamingTheKey) {
  for (const char* bad :
       {"telemetry: {interval: 10ms}", "telemetry: {idle_pct: 101}", "telemetry: {enabled: maybe}",
        "telemetry: {max_size: 1kB}", "telemetry: {sample: 5s}", "telemetry: 5s"}) {
    auto c = ParseDaemonConfig(bad, "config.yaml");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().msg_id(), "config.bad_key") << bad;
    EXPECT_NE(c.status().message().find("telemetry"), std::string::npos) << bad;
  }
}

TEST(DaemonConfig, ParsesPoolsAndTheDefaultPool) {
  auto c = ParseDaemonConfig(
      "pools:\n"
      "  cluster:\n"
      "    type: slurm\n"
      "    partition: gpu\n"
      "    account: lab-1\n"
      "    shared_dir: /shared/lathe\n"
      "    signal_grace: 2m\n"
      "    slurm_conf: /etc/slurm/slurm.conf\n"
      "default_pool: cluster\n",
      "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->pools);
  EXPECT_EQ(c->pools->at("cluster").type, "slurm");
  const exec::SlurmPoolOptions& p = c->pools->at("cluster").slurm;
  EXPECT_EQ(p.name, "cluster");
  EXPECT_EQ(p.partition, "gpu");
  EXPECT_EQ(p.account, "lab-1");
  EXPECT_EQ(p.shared_dir, "/shared/lathe");
  EXPECT_EQ(p.signal_grace_ms, 120000);
  EXPECT_EQ(p.slurm_conf, "/etc/slurm/slurm.conf");
  EXPECT_EQ(*c->default_pool, "cluster");
  EXPECT_TRUE(p.rest.url.empty());  // sbatch only unless configured
}

TEST(DaemonConfig, ParsesAPoolsSlurmrestd) {
  auto c = ParseDaemonConfig(
      "pools:\n"
      "  cluster:\n"
      "    type: slurm\n"
      "    shared_dir: /shared/lathe\n"
      "    rest: {url: 'http://127.0.0.1:6820', version: v0.0.38, token_lifespan: 10m}\n"
      "  other:\n"
      "    type: slurm\n"
      "    shared_dir: /shared/lathe\n"
      "    rest: {url: 'unix:/run/slurmrestd.sock'}\n",
      "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const exec::SlurmRestOptions& r = c->pools->at("cluster").slurm.rest;
  EXPECT_EQ(r.url, "http://127.0.0.1:6820");
  EXPECT_EQ(r.version, "v0.0.38");
  EXPECT_EQ(r.token_lifespan_ms, 600000);
  const exec::SlurmRestOptions& o = c->pools->at("other").slurm.rest;
  EXPECT_EQ(o.url, "unix:/run/slurmrestd.sock");
  EXPECT_EQ(o.token_lifespan_ms, 1800000);  // slurm's default lifespan
}

TEST(DaemonConfig, RejectsBadPoolsNamingTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"pools: {local: {type: slurm, shared_dir: /s}}\n", "pools.local"},
      {"pools: {Big: {type: slurm, shared_dir: /s}}\n", "pools.Big"},
      {"pools: {c: {type: k8s, shared_dir: /s}}\n", "pools.c.type"},
      {"pools: {c: {shared_dir: /s}}\n", "pools.c.type"},
      {"pools: {c: {type: slurm}}\n", "pools.c.shared_dir"},
      {"pools: {c: {type: slurm, shared_dir: rel/dir}}\n", "pools.c.shared_dir"},
      {"pools: {c: {type: slurm, shared_dir: /s, partition: 'a b'}}\n", "pools.c.partition"},
      {"pools: {c: {type: slurm, shared_dir: /s, qos: '$(x)'}}\n", "pools.c.qos"},
      {"pools: {c: {type: slurm, shared_dir: /s, signal_grace: 2h}}\n", "pools.c.signal_grace"},
      {"pools: {c: {type: slurm, shared_dir: /s, nodes: 3}}\n", "pools.c.nodes"},
      {"pools: {c: {type: slurm, shared_dir: /s, rest: http://x:1}}\n", "pools.c.rest"},
      {"pools: {c: {type: slurm, shared_dir: /s, rest: {version: v0.0.38}}}\n", "pools.c.rest.url"},
      {"pools: {c: {type: slurm, shared_dir: /s, rest: {url: 'ftp://x'}}}\n", "pools.c.rest.url"},
      {"pools: {c: {type: slurm, shared_dir: /s, rest: {url: 'http://x/a b'}}}\n",
       "pools.c.rest.url"},
      {"pools: {c: {type: slurm, shared_dir: /s, rest: {url: 'http://x', version: 38}}}\n",
       "pools.c.rest.version"},
      {"pools: {c: {type: slurm, shared_dir: /s, rest: {url: 'http://x', token_lifespan: 5s}}}\n",
       "pools.c.rest.token_lifespan"},
      {"pools: {c: {type: slurm, shared_dir: /s, rest: {url: 'http://x', user: root}}}\n",
       "pools.c.rest.user"},
      {"default_pool: c\n", "default_pool"},
  };
  for (const auto& [bad, key] : cases) {
    auto c = ParseDaemonConfig(bad, "c.yaml");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().msg_id(), "config.bad_key") << bad;
    EXPECT_NE(c.status().message().find(std::string("'") + key + "'"), std::string::npos)
        << bad << " -> " << c.status().message();
  }
  EXPECT_TRUE(ParseDaemonConfig("default_pool: local\n", "c.yaml").ok());
}

TEST(DaemonConfig, ParsesProfiles) {
  auto c = ParseDaemonConfig(
      "pools: {cluster: {type: slurm, shared_dir: /shared/lathe}}\n"
      "profiles:\n"
      "  a100x2: {gpus: 2, gpu_type: A100, cpus: 16, memory: 128GB, shm: 16GB,\n"
      "           pool: cluster, partition: gpu-a100}\n"
      "  small: {gpus: 1, memory: 24GB}\n"
      "  here: {gpus: 1, pool: local}\n",
      "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->profiles);
  ASSERT_EQ(c->profiles->size(), 3u);
  const run::Profile& p = c->profiles->at("a100x2");
  EXPECT_EQ(p.name, "a100x2");
  EXPECT_EQ(p.gpus, 2);
  EXPECT_EQ(p.gpu_type, "A100");
  EXPECT_EQ(p.cpus, 16.0);
  EXPECT_EQ(p.memory_bytes, 128'000'000'000ull);
  EXPECT_EQ(p.shm_bytes, 16'000'000'000ull);
  EXPECT_EQ(p.pool, "cluster");
  EXPECT_EQ(p.partition, "gpu-a100");
  EXPECT_EQ(c->profiles->at("small").memory_bytes, 24'000'000'000ull);
  EXPECT_FALSE(c->profiles->at("small").cpus);
}

TEST(DaemonConfig, RejectsBadProfilesNamingTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"profiles: [a, b]\n", "profiles"},
      {"profiles: {Big: {gpus: 1}}\n", "profiles.Big"},
      {"profiles: {p: 3}\n", "profiles.p"},
      {"profiles: {p: {gpus: many}}\n", "profiles.p.gpus"},
      {"profiles: {p: {memory: lots}}\n", "profiles.p.memory"},
      {"profiles: {p: {gpu_type: 'A100 x'}}\n", "profiles.p.gpu_type"},
      {"profiles: {p: {partition: '$(x)'}}\n", "profiles.p.partition"},
      {"profiles: {p: {command: [x]}}\n", "profiles.p"},
      {"profiles: {p: {pool: cluster}}\n", "profiles.p.pool"},  // no such pool
  };
  for (const auto& [bad, key] : cases) {
    auto c = ParseDaemonConfig(bad, "c.yaml");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().msg_id(), "config.bad_key") << bad;
    EXPECT_NE(c.status().message().find(std::string("'") + key + "'"), std::string::npos)
        << bad << " -> " << c.status().message();
  }
}

}  // namespace
}  // namespace lathe::daemon
