// ModelInstance with the identity backend (built beside the tests): which
// instances run batches on the dispatching thread, and what a claimed batch does.
#include "lathe/serve/instance.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "lathe/common/i18n.h"

namespace lathe::serve {
namespace {

std::unique_ptr<ModelInstance> LoadIdentity(BackendRegistry& registry,
                                            const std::string& config_json) {
  auto lib = registry.Get("identity");
  EXPECT_TRUE(lib.ok()) << lib.status().ToString();
  if (!lib.ok()) return nullptr;
  ModelInstance::Options o;
  o.library = *lib;
  o.spec.model_name = "echo";
  o.spec.model_version = 1;
  o.spec.config_json = config_json;
  o.max_batch_size = 8;
  o.now_us = [] { return int64_t{0}; };
  auto inst = ModelInstance::Create(std::move(o));
  EXPECT_TRUE(inst.ok()) << inst.status().ToString();
  return inst.ok() ? std::move(*inst) : nullptr;
}

Batch OneRequest(std::vector<InferResult>& results, std::vector<std::thread::id>& threads) {
  auto r = std::make_unique<PendingRequest>();
  r->inputs.push_back(
      Tensor{"x", DataType::kFp32, {1, 1}, std::string("\0\0\x80\x3f", 4)});  // 1.0f
  r->done = [&](InferResult res) {
    results.push_back(std::move(res));
    threads.push_back(std::this_thread::get_id());
  };
  Batch b;
  b.push_back(std::move(r));
  return b;
}

TEST(ModelInstance, AClaimedBatchRunsAndIsAnsweredOnTheCallersThread) {
  BackendRegistry registry({LATHE_BACKEND_BUILD_DIR});
  auto inst = LoadIdentity(registry, R"({"outputs": [{"name": "y"}]})");
  ASSERT_NE(inst, nullptr);
  EXPECT_TRUE(inst->runs_inline());
  ASSERT_TRUE(inst->TryClaim());
  EXPECT_FALSE(inst->idle());
  EXPECT_FALSE(inst->TryClaim());  // one batch at a time
  std::vector<InferResult> results;
  std::vector<std::thread::id> threads;
  inst->RunClaimed(OneRequest(results, threads));
  ASSERT_EQ(results.size(), 1u);  // answered before RunClaimed returned
  EXPECT_EQ(threads[0], std::this_thread::get_id());
  ASSERT_TRUE(results[0].status.ok()) << results[0].status.ToString();
  ASSERT_EQ(results[0].outputs.size(), 1u);
  EXPECT_EQ(results[0].outputs[0].name, "y");
  EXPECT_EQ(results[0].outputs[0].data, std::string("\0\0\x80\x3f", 4));
  EXPECT_TRUE(inst->idle());
  EXPECT_EQ(inst->executed(), 1u);
}

TEST(ModelInstance, ABackendThatMaySleepKeepsItsOwnThread) {
  BackendRegistry registry({LATHE_BACKEND_BUILD_DIR});
  auto inst = LoadIdentity(registry, R"({"parameters": {"delay_us": 1}})");
  ASSERT_NE(inst, nullptr);
  EXPECT_FALSE(inst->runs_inline());
}

TEST(ModelInstance, AClaimedBatchAfterStopIsAnsweredUnavailable) {
  BackendRegistry registry({LATHE_BACKEND_BUILD_DIR});
  auto inst = LoadIdentity(registry, "{}");
  ASSERT_NE(inst, nullptr);
  ASSERT_TRUE(inst->TryClaim());
  inst->Stop();  // unloads: the claimed batch finds no backend
  std::vector<InferResult> results;
  std::vector<std::thread::id> threads;
  inst->RunClaimed(OneRequest(results, threads));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status.code(), Code::kUnavailable);
}

// backend_api.h: the first line of a backend's error is what a client may
// see; the rest (a traceback, source paths) is for the server's log.
TEST(ModelInstance, TheClientGetsTheFirstLineOfABackendError) {
  char path[] = "/tmp/lathe-instance-test-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  BackendRegistry registry({LATHE_BACKEND_BUILD_DIR});
  auto inst = LoadIdentity(
      registry, std::string(R"({"parameters": {"fail_while_exists": ")") + path + "\"}}");
  ::unlink(path);
  ASSERT_NE(inst, nullptr);
  std::ofstream(path).put('x');
  ASSERT_TRUE(inst->TryClaim());
  std::vector<InferResult> results;
  std::vector<std::thread::id> threads;
  inst->RunClaimed(OneRequest(results, threads));
  ::unlink(path);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status.code(), Code::kUnavailable);
  EXPECT_EQ(results[0].status.message(),
            std::string("identity: failing while ") + path + " exists");
}

TEST(ForClient, KeepsTheFirstLineBoundedAndCatalogMessagesWhole) {
  Status multi(Code::kInvalidArgument, "forward(): bad input\nTraceback ...\n  File \"/src/m.py\"");
  EXPECT_EQ(ForClient(multi).message(), "forward(): bad input");
  EXPECT_EQ(ForClient(multi).code(), Code::kInvalidArgument);
  // The model's words for a wrong shape or datatype get their catalog id, in both languages.
  Status shape(Code::kInvalidArgument,
               "forward(): mat1 and mat2 shapes cannot be multiplied (1x3 and 4x8)\nTraceback");
  EXPECT_EQ(ForClient(shape).msg_id(), "serve.wrong_shape");
  EXPECT_EQ(ForClient(shape).message(),
            "an input has the wrong shape: the model refused it: forward(): mat1 and mat2 shapes "
            "cannot be multiplied (1x3 and 4x8)");
  Status dtype(Code::kInvalidArgument, "expected scalar type Float but found Double");
  EXPECT_EQ(ForClient(dtype).msg_id(), "serve.wrong_datatype");
  EXPECT_NE(Localize(ForClient(dtype), Lang::kZh).find("数据类型不对"), std::string::npos);
  EXPECT_EQ(ForClient(Status(Code::kInternal, "shape of the moon")).msg_id(), "");
  Status long_line(Code::kInternal, std::string(2000, 'a'));
  EXPECT_EQ(ForClient(long_line).message().size(), kClientErrorMaxChars + 3);
  Status catalog = Status::Msg(Code::kUnavailable, "serve.stopping");
  EXPECT_EQ(ForClient(catalog).msg_id(), "serve.stopping");
  EXPECT_EQ(ForClient(catalog).message(), catalog.message());
}

}  // namespace
}  // namespace lathe::serve
