#include "lathe/run/event_text.h"

#include <gtest/gtest.h>

namespace lathe::run {
namespace {

Json StateEvent(const std::string& message, const std::string& from, const std::string& to) {
  return {{"type", "state"}, {"message", message}, {"data", {{"from", from}, {"to", to}}}};
}

TEST(StateLabel, EachLanguageAndUnknownNames) {
  EXPECT_EQ(StateLabel("failed", Lang::kEn), "failed");
  EXPECT_EQ(StateLabel("failed", Lang::kZh), "已失败");
  EXPECT_EQ(StateLabel("failed", Lang::kPseudo), "⟦failed⟧");
  EXPECT_EQ(StateLabel("no-such-state", Lang::kZh), "no-such-state");
  EXPECT_EQ(EventTypeLabel("checkpoint", Lang::kZh), "检查点");
}

TEST(EventText, ReadsTheEnglishMessageBack) {
  Json e = StateEvent("exited with code 1", "running", "failed");
  EXPECT_EQ(EventText(e, Lang::kEn), "exited with code 1");
  EXPECT_EQ(EventText(e, Lang::kZh), "已退出，退出码 1");
  EXPECT_EQ(EventText(e, Lang::kPseudo), "⟦exited with code 1⟧");
  // The longer English text wins over a shorter one it also matches.
  EXPECT_EQ(
      EventText(StateEvent("started, pid 42; stopping it", "starting", "stopping"), Lang::kZh),
      "已启动（进程号 42），正在停止");
  EXPECT_EQ(ReasonText("killed by SIGKILL", Lang::kZh), "被信号 SIGKILL 终止");
}

TEST(EventText, MessageIdAndArgumentsWinOverTheMessage) {
  Json e = {
      {"type", "state"},
      {"message", "something else"},
      {"data",
       {{"msg_id", "event.never_placeable"},
        {"msg_args", {{"reason", {{"msg_id", "event.exited"}, {"msg_args", {{"code", 3}}}}}}}}}};
  EXPECT_EQ(EventText(e, Lang::kZh), "无论如何都无法分配资源：已退出，退出码 3");
  EXPECT_EQ(EventText(e, Lang::kPseudo), "⟦cannot ever be placed: ⟦exited with code 3⟧⟧");
}

TEST(EventText, WhatTheDaemonStoresRendersInEachLanguage) {
  EventMessage m = MakeEventMessage("event.started", {{"pid", "42"}}, {{"from", "starting"}});
  EXPECT_EQ(m.message, "started, pid 42");
  EXPECT_EQ(m.data["from"], "starting");
  Json e = {{"type", "state"}, {"message", m.message}, {"data", m.data}};
  EXPECT_EQ(EventText(e, Lang::kZh), "已启动，进程号 42");
  EXPECT_EQ(EventText(e, Lang::kEn), "started, pid 42");
}

TEST(EventText, AMsgIdWithoutArgumentsIsReadFromTheMessage) {
  // The log-lost warning names its id but not its arguments.
  Status lost =
      Status::Msg(Code::kIoError, "run.log_lost", {{"bytes", "10"}, {"reason", "disk full"}});
  Json e = {{"type", "warning"},
            {"message", lost.message()},
            {"data", {{"lost_bytes", 10}, {"reason", "disk full"}, {"msg_id", "run.log_lost"}}}};
  EXPECT_EQ(EventText(e, Lang::kZh), Localize(lost, Lang::kZh));
}

TEST(EventText, PartsAndNestedReasons) {
  Json e = {
      {"type", "checkpoint"},
      {"message", "snapshot abcdef123456 (written): 3 files, 1.0 kB new; resume point ckpt_100.pt"},
      {"data", {{"snapshot", "abcdef123456"}}}};
  EXPECT_EQ(EventText(e, Lang::kZh),
            "快照 abcdef123456（写入完成）：3 个文件，新增 1.0 kB；恢复点 ckpt_100.pt");
  EXPECT_EQ(EventText(e, Lang::kEn), e["message"].get<std::string>());
  // The last part's placeholder does not swallow the first part.
  e["message"] =
      "snapshot abcdef123456 (written): 1 files, 2B new; ckpt_1.pt is incomplete (short)";
  EXPECT_EQ(EventText(e, Lang::kZh),
            "快照 abcdef123456（写入完成）：1 个文件，新增 2B；ckpt_1.pt 不完整（short）");
  EXPECT_EQ(ReasonText("stopped after exceeding max_duration (killed by SIGTERM)", Lang::kZh),
            "超过最长运行时间（max_duration）后被停止（被信号 SIGTERM 终止）");
}

TEST(EventText, UnknownMessagesStayWithTheStateTranslated) {
  Json e = StateEvent("a message no catalog entry has", "running", "lost");
  EXPECT_EQ(EventText(e, Lang::kEn), "a message no catalog entry has");
  EXPECT_EQ(EventText(e, Lang::kZh), "已丢失：a message no catalog entry has");
  Json info = {{"type", "info"}, {"message", "another unknown one"}, {"data", Json::object()}};
  EXPECT_EQ(EventText(info, Lang::kZh), "another unknown one");
}

TEST(EventText, DiagnosisUsesTheKnowledgeBaseTitle) {
  Json e = {
      {"type", "diagnosis"},
      {"message", "known failure: cuda-oom"},
      {"data",
       {{"matches",
         {{{"id", "cuda-oom"}, {"title", {{"en", "CUDA out of memory"}, {"zh", "显存不足"}}}}}}}}};
  EXPECT_EQ(EventText(e, Lang::kZh), "识别出已知故障：显存不足");
  EXPECT_EQ(EventText(e, Lang::kEn), "known failure: cuda-oom");
}

// Every event text, filled with sample values, reads back to its own id:
// no entry hides another, so a daemon message always finds its text.
TEST(EventText, EveryEventTextReadsBackToItself) {
  int checked = 0;
  for (const DataEntry& e : Catalog::Default().entries()) {
    if (e.id.rfind("event.", 0) != 0 || e.id == "event.state_fallback") continue;
    MsgArgs args;
    const std::string& en = e.text.at("text").en;
    for (size_t i = en.find('{'); i != std::string::npos; i = en.find('{', i + 1)) {
      std::string key = en.substr(i + 1, en.find('}', i) - i - 1);
      args.push_back({key, "v" + std::to_string(args.size())});
    }
    auto m = MatchEnglish(Tr(e.id, Lang::kEn, args), "event.");
    ASSERT_TRUE(m.has_value()) << e.id;
    EXPECT_EQ(m->id, e.id);
    ++checked;
  }
  EXPECT_GT(checked, 30);
}

}  // namespace
}  // namespace lathe::run
