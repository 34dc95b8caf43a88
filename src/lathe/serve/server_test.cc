// The whole server in-process, over loopback, with the identity backend
// (built beside the tests): routing, v2 JSON/binary, /predict, errors,
// priorities, queue limits, health probes, metrics.
#include "lathe/serve/server.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "lathe/common/json.h"
#include "lathe/net/http_client.h"

namespace lathe::serve {
namespace {

namespace fs = std::filesystem;

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lathe-serve-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (server_) server_->Stop();
    fs::remove_all(dir_);
  }
  void AddModel(const std::string& name, const std::string& config,
                std::vector<int> versions = {1}) {
    fs::create_directories(dir_ / name);
    std::ofstream(dir_ / name / "config.yaml") << config;
    for (int v : versions) fs::create_directories(dir_ / name / std::to_string(v));
  }
  Status Start(const std::string& model_control = "none") {
    ServeOptions o;
    o.model_control = model_control;
    o.watch_interval_ms = 30;
    o.repository = dir_.string();
    o.port = 0;
    o.gpus = "none";
    o.backend_dirs = {LATHE_BACKEND_BUILD_DIR};
    o.probe_tick_ms = 20;
    o.drain_ms = 5000;
    auto s = ServeServer::Create(o);
    if (!s.ok()) return s.status();
    server_ = std::move(*s);
    return server_->Start();
  }
  net::HttpResponse Call(const std::string& method, const std::string& path,
                         const std::string& body = "", const net::Headers& headers = {}) {
    net::ClientOptions o;
    o.base_url = "http://127.0.0.1:" + std::to_string(server_->port());
    net::HttpClient c(o);
    auto r = c.Request(method, path, body, headers);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : net::HttpResponse{};
  }
  Json CallJson(const std::string& method, const std::string& path, const std::string& body = "",
                int want = 200, const net::Headers& headers = {}) {
    auto r = Call(method, path, body, headers);
    EXPECT_EQ(r.status, want) << method << " " << path << ": " << r.body;
    auto j = ParseJson(r.body);
    return j.ok() ? *j : Json();
  }
  bool WaitFor(const std::function<bool()>& pred) {
    for (int i = 0; i < 3000; ++i) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  fs::path dir_;
  std::unique_ptr<ServeServer> server_;
};

constexpr const char* kEcho = R"(
backend: identity
max_batch_size: 8
inputs: [{name: x, datatype: FP32, dims: [2]}]
outputs: [{name: y, datatype: FP32, dims: [2]}]
dynamic_batching: {max_queue_delay_us: 1000}
)";

constexpr const char* kInfer =
    R"({"id":"a","inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","data":[1.5,-2]}]})";

TEST_F(ServerTest, V2RoutesAndInference) {
  AddModel("echo", kEcho);
  ASSERT_TRUE(Start().ok());
  EXPECT_EQ(CallJson("GET", "/v2")["name"], "lathe");
  EXPECT_EQ(CallJson("GET", "/v2/health/live")["live"], true);
  EXPECT_EQ(CallJson("GET", "/v2/health/ready")["ready"], true);
  Json meta = CallJson("GET", "/v2/models/echo");
  EXPECT_EQ(meta["platform"], "identity");
  EXPECT_EQ(meta["inputs"][0]["shape"], Json::parse("[-1,2]"));
  EXPECT_EQ(CallJson("GET", "/v2/models/echo/versions/1/ready")["ready"], true);
  Json out = CallJson("POST", "/v2/models/echo/infer", kInfer);
  EXPECT_EQ(out["id"], "a");
  EXPECT_EQ(out["model_version"], "1");
  EXPECT_EQ(out["outputs"][0]["name"], "y");
  EXPECT_EQ(out["outputs"][0]["data"], Json::parse("[1.5,-2]"));
  // The same through a version path.
  EXPECT_EQ(CallJson("POST", "/v2/models/echo/versions/1/infer", kInfer)["outputs"][0]["shape"],
            Json::parse("[1,2]"));
  // /predict and :predict with the TF-Serving row form.
  EXPECT_EQ(CallJson("POST", "/predict", R"({"instances":[[1,2],[3,4]]})")["predictions"],
            Json::parse("[[1,2],[3,4]]"));
  EXPECT_EQ(CallJson("POST", "/v1/models/echo:predict", R"({"instances":[[5,6]]})")["predictions"],
            Json::parse("[[5,6]]"));
}

TEST_F(ServerTest, BinaryOutputs) {
  AddModel("echo", kEcho);
  ASSERT_TRUE(Start().ok());
  std::string json =
      R"({"inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","parameters":{"binary_data_size":8}}],)"
      R"("parameters":{"binary_data_output":true}})";
  float v[2] = {3.25f, 4};
  std::string body = json + std::string(reinterpret_cast<const char*>(v), 8);
  auto r = Call("POST", "/v2/models/echo/infer", body,
                {{"Inference-Header-Content-Length", std::to_string(json.size())}});
  ASSERT_EQ(r.status, 200) << r.body;
  std::string len(net::FindHeader(r.headers, "Inference-Header-Content-Length"));
  ASSERT_FALSE(len.empty());
  size_t n = std::stoul(len);
  EXPECT_EQ(r.body.substr(n), std::string(reinterpret_cast<const char*>(v), 8));
  EXPECT_EQ((*ParseJson(r.body.substr(0, n)))["outputs"][0]["parameters"]["binary_data_size"], 8);
}

TEST_F(ServerTest, ErrorsAreJsonWithTheRightStatus) {
  AddModel("echo", kEcho);
  ASSERT_TRUE(Start().ok());
  EXPECT_TRUE(CallJson("POST", "/v2/models/nope/infer", kInfer, 404)["error"].is_string());
  EXPECT_TRUE(CallJson("GET", "/v2/models/echo/versions/9", "", 404)["error"].is_string());
  EXPECT_TRUE(CallJson("GET", "/nowhere", "", 404)["error"].is_string());
  Json e =
      CallJson("POST", "/v2/models/echo/infer",
               R"({"inputs":[{"name":"z","shape":[1,2],"datatype":"FP32","data":[1,2]}]})", 400);
  EXPECT_NE(e["error"].get<std::string>().find("its inputs: x"), std::string::npos) << e;
  CallJson("POST", "/v2/models/echo/infer",
           R"({"inputs":[{"name":"x","shape":[1,2],"datatype":"INT32","data":[1,2]}]})", 400);
  CallJson("POST", "/v2/models/echo/infer",
           R"({"inputs":[{"name":"x","shape":[1,3],"datatype":"FP32","data":[1,2,3]}]})", 400);
  CallJson(
      "POST", "/v2/models/echo/infer",
      R"({"inputs":[{"name":"x","shape":[9,2],"datatype":"FP32","data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18]}]})",
      400);
  CallJson("POST", "/v2/models/echo/infer",
           R"({"inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","data":[NaN,1]}]})", 400);
  CallJson("POST", "/v2/models/echo/infer", kInfer, 400, {{"X-Priority", "urgent"}});
  CallJson("POST", "/v2/models/echo/infer", kInfer, 400, {{"X-Timeout-Ms", "-5"}});
  CallJson(
      "POST", "/v2/models/echo/infer",
      R"({"inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","data":[1,2]}],"outputs":[{"name":"q"}]})",
      400);
  CallJson("GET", "/v2/models/echo/infer", "", 405);  // RFC 9110: wrong method, with Allow
  CallJson("POST", "/v2/repository/models/echo/unload", "", 409);  // model control is off
}

TEST_F(ServerTest, WrongMethodIs405WithAllowUnknownPathIs404) {
  AddModel("echo", kEcho);
  ASSERT_TRUE(Start().ok());
  struct Case {
    const char* method;
    const char* path;
    const char* allow;
  };
  for (const Case& k :
       {Case{"GET", "/v2/models/echo/infer", "POST"},
        Case{"PUT", "/v2/models/echo/versions/1/infer", "POST"},
        Case{"POST", "/v2/models/echo", "GET"}, Case{"DELETE", "/v2/health/ready", "GET"},
        Case{"GET", "/predict", "POST"}, Case{"GET", "/v1/models/echo:predict", "POST"},
        Case{"GET", "/v2/repository/index", "POST"}}) {
    auto r = Call(k.method, k.path);
    EXPECT_EQ(r.status, 405) << k.method << " " << k.path << ": " << r.body;
    EXPECT_EQ(net::FindHeader(r.headers, "Allow"), k.allow) << k.path;
    auto j = ParseJson(r.body);
    ASSERT_TRUE(j.ok());
    // KServe's {"error": …} with Lathe's code and catalog id.
    EXPECT_EQ((*j)["msg_id"], "serve.bad_method");
    EXPECT_TRUE((*j)["error"].is_string());
  }
  for (const char* path : {"/v2/models/echo/versions", "/v2/models/echo/explain", "/v1/models/echo",
                           "/v2/repository/models/echo/reload", "/v2/models"}) {
    auto r = Call("POST", path);
    EXPECT_EQ(r.status, 404) << path << ": " << r.body;
    EXPECT_EQ(net::FindHeader(r.headers, "Allow"), "") << path;
  }
  // Segments, not strings: a trailing slash names the same endpoint.
  EXPECT_EQ(CallJson("GET", "/v2/")["name"], "lathe");
  EXPECT_EQ(CallJson("POST", "/v2/models/echo/infer/", kInfer)["outputs"][0]["data"],
            Json::parse("[1.5,-2]"));
}

TEST_F(ServerTest, FullQueueRejectsWith429AndProbesSeeAHang) {
  std::string block = (dir_ / "block").string();
  AddModel("slow", std::string(R"(
backend: identity
max_batch_size: 1
inputs: [{name: x, datatype: FP32, dims: [2]}]
dynamic_batching:
  queue: {max_size: 2}
health_probe_interval: 200ms
parameters: {block_while_exists: )") +
                       block + "}\n");
  ASSERT_TRUE(Start().ok());
  EXPECT_EQ(CallJson("GET", "/v2/models/slow/ready")["ready"], true);
  std::ofstream(block) << "x";
  // One request runs (and hangs), two wait, the next is rejected at once.
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&] {
      if (Call("POST", "/v2/models/slow/infer", kInfer).status == 200) ok++;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  Json rej = CallJson("POST", "/v2/models/slow/infer", kInfer, 429);
  EXPECT_NE(rej["error"].get<std::string>().find("full"), std::string::npos);
  // A hanging backend: the probe goes unanswered and the model reports not-ready.
  EXPECT_TRUE(WaitFor([&] { return Call("GET", "/v2/models/slow/ready").status == 503; }));
  EXPECT_EQ(Call("GET", "/v2/health/ready").status, 503);
  fs::remove(block);
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 3);
  EXPECT_TRUE(WaitFor([&] { return Call("GET", "/v2/models/slow/ready").status == 200; }));
  std::string metrics = Call("GET", "/metrics").body;
  EXPECT_NE(
      metrics.find(R"(lathe_serve_requests_total{model="slow",version="1",outcome="rejected"} 1)"),
      std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("lathe_serve_batch_size_bucket"), std::string::npos);
  EXPECT_NE(metrics.find(R"(lathe_serve_queue_length{model="slow",version="1",priority="1"} 0)"),
            std::string::npos);
  EXPECT_NE(metrics.find(
                R"(lathe_serve_model_loads_total{model="slow",version="1",outcome="success"} 1)"),
            std::string::npos);
}

// The identity backend runs batches on the dispatching thread, so a probe is
// answered inside the prober's own Submit: probes keep passing (each is sent
// only once the last was answered) and requests are still served.
TEST_F(ServerTest, ProbesPassOnAnInstanceThatRunsInline) {
  AddModel("echo", std::string(kEcho) + "health_probe_interval: 20ms\n");
  ASSERT_TRUE(Start().ok());
  auto batches = [&] {
    std::string m = Call("GET", "/metrics").body;
    std::string key = R"(lathe_serve_batch_size_count{model="echo",version="1"} )";
    auto at = m.find(key);
    return at == std::string::npos ? 0 : std::stoi(m.substr(at + key.size()));
  };
  EXPECT_TRUE(WaitFor([&] { return batches() >= 3; }));
  EXPECT_EQ(CallJson("GET", "/v2/models/echo/ready")["ready"], true);
  EXPECT_EQ(CallJson("POST", "/v2/models/echo/infer", kInfer)["outputs"][0]["data"],
            Json::parse("[1.5,-2]"));
}

TEST_F(ServerTest, QueueTimeoutGives503) {
  std::string block = (dir_ / "block").string();
  AddModel("slow", std::string(R"(
backend: identity
max_batch_size: 1
dynamic_batching: {}
warmup: false
parameters: {block_while_exists: )") +
                       block + "}\n");
  ASSERT_TRUE(Start().ok());
  std::ofstream(block) << "x";
  std::thread first([&] { Call("POST", "/v2/models/slow/infer", kInfer); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Json e = CallJson("POST", "/v2/models/slow/infer", kInfer, 503, {{"X-Timeout-Ms", "50"}});
  EXPECT_NE(e["error"].get<std::string>().find("timeout"), std::string::npos) << e;
  fs::remove(block);
  first.join();
}

TEST_F(ServerTest, BadConfigFailsCreateNamingTheFile) {
  AddModel("bad", "backend: identity\ninstances: [{device: tpu}]\n");
  Status s = Start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find((dir_ / "bad" / "config.yaml").string()), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("instances[0].device"), std::string::npos) << s.message();
}

TEST_F(ServerTest, UnknownBackendListsTheAvailableOnes) {
  AddModel("onnx", "backend: onnxruntime\n");
  Status s = Start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("identity"), std::string::npos) << s.message();
}

TEST_F(ServerTest, HighPriorityOvertakesQueuedLowPriority) {
  std::string block = (dir_ / "block").string();
  AddModel("slow", std::string(R"(
backend: identity
max_batch_size: 1
dynamic_batching: {priority_levels: 2, default_priority: 2}
warmup: false
parameters: {delay_us: 200000, block_while_exists: )") +
                       block + "}\n");
  ASSERT_TRUE(Start().ok());
  std::ofstream(block) << "x";
  std::mutex mu;
  std::vector<std::string> order;
  std::vector<std::thread> clients;
  auto send = [&](std::string tag, net::Headers h) {
    clients.emplace_back([&, tag, h] {
      Call("POST", "/v2/models/slow/infer", kInfer, h);
      std::lock_guard<std::mutex> l(mu);
      order.push_back(tag);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  };
  send("first", {});
  send("low", {{"X-Priority", "low"}});
  send("high", {{"X-Priority", "high"}});
  fs::remove(block);
  for (auto& t : clients) t.join();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[2], "low");  // "high" came later but ran before it
}

TEST_F(ServerTest, WatchSwapsInCompleteVersionsWithoutFailedRequests) {
  AddModel("m", kEcho, {1});
  ASSERT_TRUE(Start("watch").ok());
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::mutex mu;
  std::vector<std::string> versions;  // model_version of each answer, in order
  std::thread client([&] {
    net::ClientOptions o;
    o.base_url = "http://127.0.0.1:" + std::to_string(server_->port());
    net::HttpClient c(o);
    while (!stop) {
      auto r = c.Request("POST", "/v2/models/m/infer", kInfer);
      auto j = r.ok() && r->status == 200 ? ParseJson(r->body)
                                          : Result<Json>(Status::Internal("failed"));
      if (!j.ok()) {
        failures++;
        continue;
      }
      std::lock_guard<std::mutex> l(mu);
      versions.push_back((*j)["model_version"].get<std::string>());
    }
  });
  auto last = [&] {
    std::lock_guard<std::mutex> l(mu);
    return versions.empty() ? std::string() : versions.back();
  };
  ASSERT_TRUE(WaitFor([&] { return last() == "1"; }));
  // A version directory without its READY marker (identity has no model file) is not complete.
  fs::create_directories(dir_ / "m" / "2");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(last(), "1");
  std::ofstream(dir_ / "m" / "2" / "READY");
  EXPECT_TRUE(WaitFor([&] { return last() == "2"; }));
  // A new model directory is loaded; a removed one is unloaded.
  AddModel("extra", kEcho, {});
  fs::create_directories(dir_ / "extra" / "1");
  std::ofstream(dir_ / "extra" / "1" / "READY");
  EXPECT_TRUE(WaitFor([&] { return Call("GET", "/v2/models/extra/ready").status == 200; }));
  fs::remove_all(dir_ / "extra");
  EXPECT_TRUE(WaitFor([&] { return Call("GET", "/v2/models/extra/ready").status == 404; }));
  stop = true;
  client.join();
  EXPECT_EQ(failures.load(), 0);
  std::lock_guard<std::mutex> l(mu);
  EXPECT_TRUE(std::is_sorted(versions.begin(), versions.end())) << "answers went back to version 1";
}

TEST_F(ServerTest, ExplicitLoadAndUnload) {
  AddModel("m", kEcho, {1});
  ASSERT_TRUE(Start("explicit").ok());
  fs::create_directories(dir_ / "m" / "2");
  CallJson("POST", "/v2/repository/models/m/load");
  EXPECT_EQ(CallJson("POST", "/v2/models/m/infer", kInfer)["model_version"], "2");
  Json idx = CallJson("POST", "/v2/repository/index");
  ASSERT_EQ(idx.size(), 1u);
  EXPECT_EQ(idx[0]["version"], "2");
  CallJson("POST", "/v2/repository/models/m/unload");
  CallJson("POST", "/v2/models/m/infer", kInfer, 404);
  CallJson("POST", "/v2/repository/models/nope/load", "", 404);
}

}  // namespace
}  // namespace lathe::serve
