// The knowledge base (data/kb.yaml) and `lathe explain`: validation, the
// cross-match over tests/data/explain, long lines, and both languages.
#include "lathe/doctor/kb.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "lathe/common/embedded.h"
#include "lathe/doctor/check.h"
#include "lathe/doctor/explain_format.h"
#include "lathe/doctor/explainer.h"
#include "lathe/doctor/glossary.h"

namespace lathe::doctor {
namespace {

namespace fs = std::filesystem;

const fs::path kExcerpts = fs::path(LATHE_SOURCE_DIR) / "tests/data/explain";

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

constexpr const char* kEntry = R"(- id: a.b
  title: {en: "T", zh: "题"}
  signatures: ['boom \d+']
  scenario: {en: "s", zh: "景"}
  cause: {en: "c", zh: "因"}
  verify: "echo"
  fix: {en: "f", zh: "修"}
)";

// ---- validation ------------------------------------------------------------------

TEST(KnowledgeBase, EmbeddedFileIsValidAndLargeEnough) {
  auto kb = KnowledgeBase::FromYaml(FindEmbedded("kb.yaml"), "data/kb.yaml");
  ASSERT_TRUE(kb.ok()) << kb.status().ToString();
  EXPECT_GE(kb->entries().size(), 40u);
  for (const auto& e : kb->entries()) {
    EXPECT_FALSE(e.verify.empty()) << e.id;
    EXPECT_FALSE(e.signatures.empty()) << e.id;
    for (const BiText* t : {&e.title, &e.scenario, &e.cause, &e.fix}) {
      EXPECT_FALSE(t->en.empty()) << e.id;
      EXPECT_FALSE(t->zh.empty()) << e.id;
    }
  }
}

TEST(KnowledgeBase, RejectsBrokenEntries) {
  EXPECT_TRUE(KnowledgeBase::FromYaml(kEntry, "t.yaml").ok());
  std::string no_zh = kEntry;
  no_zh.replace(no_zh.find(", zh: \"因\""), 11, "");
  auto r = KnowledgeBase::FromYaml(no_zh, "t.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("zh"), std::string::npos);

  auto dup = KnowledgeBase::FromYaml(std::string(kEntry) + kEntry, "t.yaml");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("duplicate"), std::string::npos);

  std::string bad_re = kEntry;
  bad_re.replace(bad_re.find("boom"), 4, "bo(om");
  auto re = KnowledgeBase::FromYaml(bad_re, "t.yaml");
  ASSERT_FALSE(re.ok());
  EXPECT_NE(re.status().message().find("does not compile"), std::string::npos);

  std::string no_verify = kEntry;
  no_verify.replace(no_verify.find("  verify: \"echo\"\n"), 17, "");
  auto v = KnowledgeBase::FromYaml(no_verify, "t.yaml");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("verify"), std::string::npos);

  std::string no_sig = kEntry;
  no_sig.replace(no_sig.find("  signatures: ['boom \\d+']\n"), 27, "");
  EXPECT_FALSE(KnowledgeBase::FromYaml(no_sig, "t.yaml").ok());
}

TEST(KnowledgeBase, LinksToTermsAndChecksExist) {
  const KnowledgeBase& kb = KnowledgeBase::Default();
  std::set<std::string_view> checks;
  for (const auto& c : AllChecks()) checks.insert(c.id);
  for (const auto& e : kb.entries()) {
    for (const auto& t : e.terms)
      EXPECT_NE(Glossary::Default().Find(t), nullptr) << e.id << " → " << t;
    for (const auto& c : e.checks) EXPECT_TRUE(checks.count(c)) << e.id << " → " << c;
  }
  for (const auto& g : Glossary::Default().entries()) {
    for (const auto& k : g.kb) EXPECT_NE(kb.Find(k), nullptr) << g.id << " → " << k;
  }
}

// ---- the cross-match ------------------------------------------------------------------

TEST(Explain, EveryExcerptRanksItsOwnEntryFirst) {
  const KnowledgeBase& kb = KnowledgeBase::Default();
  std::set<std::string> covered;
  int excerpts = 0;
  for (const auto& dir : fs::directory_iterator(kExcerpts)) {
    std::string id = dir.path().filename().string();
    if (id == "clean") continue;
    ASSERT_NE(kb.Find(id), nullptr) << "excerpt directory for unknown entry " << id;
    for (const auto& f : fs::directory_iterator(dir.path())) {
      auto m = Explainer::Default().Explain(Slurp(f.path()), 3);
      ASSERT_FALSE(m.empty()) << f.path() << " matched nothing";
      EXPECT_EQ(m[0].entry->id, id) << f.path() << " ranked " << m[0].entry->id << " first";
      ++excerpts;
      covered.insert(id);
    }
  }
  for (const auto& e : kb.entries()) EXPECT_TRUE(covered.count(e.id)) << "no excerpt for " << e.id;
  EXPECT_GE(excerpts, static_cast<int>(kb.entries().size()));
}

TEST(Explain, CleanLogsMatchNothing) {
  int logs = 0;
  for (const auto& f : fs::directory_iterator(kExcerpts / "clean")) {
    auto m = Explainer::Default().Explain(Slurp(f.path()));
    EXPECT_TRUE(m.empty()) << f.path() << " matched " << (m.empty() ? "" : m[0].entry->id) << ": "
                           << (m.empty() ? "" : m[0].line);
    ++logs;
  }
  EXPECT_GE(logs, 5);
}

// ---- matching details ---------------------------------------------------------------------

TEST(Explain, ReportsTheMatchedLine) {
  std::string log = "step 1 ok\nstep 2 ok\r\nRuntimeError: Torch not compiled with CUDA enabled\n";
  auto m = Explainer::Default().Explain(log);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].entry->id, "torch.cpu_build");
  EXPECT_EQ(m[0].line_no, 3u);
  EXPECT_EQ(m[0].line, "RuntimeError: Torch not compiled with CUDA enabled");
  EXPECT_EQ(m[0].score, 10);
}

TEST(Explain, HugeLinesDoNotCrashAndAreCutAroundTheMatch) {
  std::string line(1 << 20, 'x');  // 1 MiB without a newline, like a runaway tqdm bar
  for (size_t i = 0; i < line.size(); i += 97) line[i] = '|';
  line += " CUDA error: an illegal memory access was encountered ";
  line += std::string(200'000, 'z');
  auto m = Explainer::Default().Explain(line);
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m[0].entry->id, "cuda.illegal_memory_access");
  EXPECT_LE(m[0].line.size(), kMaxShownLineBytes + 2 * std::string("…").size());
  EXPECT_NE(m[0].line.find("illegal memory access"), std::string::npos);
  // Adversarial input for backtracking engines: RE2 stays linear.
  std::string evil(100'000, 'a');
  EXPECT_TRUE(Explainer::Default().Explain(evil + "!").empty());
}

TEST(Explain, InvalidUtf8IsReplacedInTheShownLine) {
  std::string log = "\xff\xfe Too many open files \xc3\n";
  auto m = Explainer::Default().Explain(log);
  ASSERT_FALSE(m.empty());
  EXPECT_NE(m[0].line.find("\xEF\xBF\xBD"), std::string::npos);  // U+FFFD
  EXPECT_NO_THROW(MatchesToJson(m, Lang::kEn).dump());
}

TEST(Explain, ChineseOutput) {
  auto m = Explainer::Default().Explain("RuntimeError: No CUDA GPUs are available\n");
  ASSERT_FALSE(m.empty());
  std::string zh = FormatMatches(m, Lang::kZh, false);
  EXPECT_NE(zh.find("[cuda.no_device] CUDA 看不到任何 GPU"), std::string::npos) << zh;
  EXPECT_NE(zh.find("匹配的第 1 行："), std::string::npos);
  EXPECT_NE(zh.find("场景："), std::string::npos);
  EXPECT_NE(zh.find("CUDA_VISIBLE_DEVICES"), std::string::npos);  // parameter names stay English
  std::string en = FormatMatches(m, Lang::kEn, false);
  EXPECT_NE(en.find("scenario:"), std::string::npos);
  EXPECT_EQ(en.find("场景"), std::string::npos);
}

TEST(Explain, DaemonDiagnosisJsonHasBothLanguages) {
  Json j = DiagnoseLog("...\nnccl error\nWatchdog caught collective operation timeout: x\n");
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["id"], "nccl.watchdog_timeout");
  EXPECT_EQ(j[0]["line_no"], 3);
  EXPECT_FALSE(j[0]["title"]["zh"].get<std::string>().empty());
  EXPECT_FALSE(j[0]["fix"]["en"].get<std::string>().empty());
  EXPECT_TRUE(j[0]["verify"].is_string());
  EXPECT_TRUE(DiagnoseLog("all good\n").empty());
}

// ---- multi-node failures -------------------------------------------------------------

std::string Excerpt(const std::string& id, const std::string& file) {
  return Slurp(kExcerpts / id / file);
}

TEST(Explain, ChildFailedErrorQuotesTheFirstFailingRankAndItsError) {
  Json j = DiagnoseLog(Excerpt("dist.child_failed", "1.log"));
  ASSERT_FALSE(j.empty());
  EXPECT_EQ(j[0]["id"], "dist.child_failed");
  EXPECT_EQ(j[0]["values"]["rank"], "6");
  EXPECT_EQ(j[0]["values"]["local_rank"], "2");
  EXPECT_EQ(j[0]["values"]["host"], "gpu-a02");  // the root cause's, not rank 5's SIGTERM
  EXPECT_EQ(j[0]["values"]["exitcode"], "1");
  EXPECT_EQ(j[0]["values"]["error"], "ValueError: sample 81234: expected 3 channels, got 1");
  EXPECT_EQ(j[0]["detail"]["en"],
            "first failure: rank 6 (local_rank 2) on gpu-a02, exit code 1: ValueError: sample "
            "81234: expected 3 channels, got 1");
  EXPECT_NE(j[0]["detail"]["zh"].get<std::string>().find("最先失败：gpu-a02 上的 rank 6"),
            std::string::npos);
}

TEST(Explain, ChildFailedErrorWithoutErrorFileTakesTheRanksOwnLines) {
  auto m = Explainer::Default().Explain(Excerpt("dist.child_failed", "2.log"));
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m[0].entry->id, "dist.child_failed");
  EXPECT_EQ(MatchDetail(m[0], Lang::kEn),
            "first failure: rank 3 (local_rank 3) on node07, exit code 1: KeyError: "
            "'tokenizer_path'");
  std::string text = FormatMatches(m, Lang::kEn, false);
  EXPECT_NE(text.find("first failure: rank 3"), std::string::npos) << text;
}

TEST(Explain, TheRootCausesOwnErrorOutranksTheWrapper) {
  // The first failing rank ran out of GPU memory: that is the explanation, and the
  // ChildFailedError entry still says which rank it was.
  std::string log =
      "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
      "Root Cause (first observed failure):\n[0]:\n  host      : n2\n"
      "  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 7)\n"
      "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
      "=====\n";
  Json j = DiagnoseLog(log);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["id"], "cuda.out_of_memory");
  EXPECT_TRUE(j[0]["detail"].is_null());
  EXPECT_EQ(j[1]["id"], "dist.child_failed");
  EXPECT_EQ(j[1]["values"]["error"],
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB");
  EXPECT_TRUE(ExtractTorchelasticRootCause("no block here\n").empty());
}

TEST(Explain, MultiNodeFailuresAreRecognised) {
  struct Case {
    const char* log;
    const char* id;
  } cases[] = {
      {"torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n",
       "dist.rendezvous_timeout"},
      {"RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, "
       "unhandled system error, NCCL version 2.14.3\n",
       "nccl.unhandled_system_error"},
      {"n1:51:90 [0] misc/ibvwrap.cc:262 NCCL WARN Call to ibv_modify_qp failed with error "
       "Invalid argument\n",
       "nccl.mtu_mismatch"},
      {"[rank3]: RuntimeError: CUDA error: invalid device ordinal\n", "dist.nproc_exceeds_gpus"},
      // Without torchrun around it, a wrong index stays the single-process entry.
      {"RuntimeError: CUDA error: invalid device ordinal\n", "cuda.invalid_device_ordinal"},
  };
  for (const auto& c : cases) {
    Json j = DiagnoseLog(c.log);
    ASSERT_FALSE(j.empty()) << c.log;
    EXPECT_EQ(j[0]["id"], c.id) << c.log;
    EXPECT_FALSE(j[0]["fix"]["zh"].get<std::string>().empty());
  }
}

TEST(KnowledgeBase, ExtractAndDetailGoTogether) {
  std::string e = kEntry;
  EXPECT_FALSE(KnowledgeBase::FromYaml(e + "  extract: torchelastic_root_cause\n", "t").ok());
  EXPECT_FALSE(
      KnowledgeBase::FromYaml(e + "  extract: nope\n  detail: {en: \"d\", zh: \"细\"}\n", "t")
          .ok());
  EXPECT_TRUE(
      KnowledgeBase::FromYaml(
          e + "  extract: torchelastic_root_cause\n  detail: {en: \"d\", zh: \"细\"}\n", "t")
          .ok());
}

}  // namespace
}  // namespace lathe::doctor
