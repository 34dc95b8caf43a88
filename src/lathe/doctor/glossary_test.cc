// The glossary (data/glossary.yaml) and `lathe term` search.
#include "lathe/doctor/glossary.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "lathe/common/embedded.h"
#include "lathe/doctor/term_format.h"
#include "lathe/doctor/term_search.h"

namespace lathe::doctor {
namespace {

TermResults Search(std::string_view q) {
  auto r = SearchTerms(Glossary::Default(), KnowledgeBase::Default(), q);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : TermResults{};
}

std::string First(std::string_view q) {
  TermResults r = Search(q);
  return r.terms.empty() ? "<none>" : r.terms[0].entry->id;
}

bool HasKb(const TermResults& r, std::string_view id) {
  return std::any_of(r.kb.begin(), r.kb.end(), [&](const KbEntry* k) { return k->id == id; });
}

bool HasTerm(const TermResults& r, std::string_view id) {
  return std::any_of(r.terms.begin(), r.terms.end(),
                     [&](const TermHit& h) { return h.entry->id == id; });
}

TEST(Glossary, EmbeddedFileIsValidAndLargeEnough) {
  auto g = Glossary::FromYaml(FindEmbedded("glossary.yaml"), "data/glossary.yaml");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_GE(g->entries().size(), 150u);
  for (const auto& e : g->entries()) {
    EXPECT_FALSE(e.term.zh.empty()) << e.id;
    EXPECT_FALSE(e.usage.zh.empty()) << e.id;
    EXPECT_FALSE(e.context.en.empty()) << e.id;
  }
}

TEST(Glossary, RejectsBrokenEntries) {
  const char* ok =
      "- id: a\n  term: {en: a, zh: 甲}\n  kind: concept\n"
      "  context: {en: c, zh: 境}\n  usage: {en: u, zh: 用}\n";
  EXPECT_TRUE(Glossary::FromYaml(ok, "g").ok());
  std::string no_zh = std::string(ok);
  no_zh.replace(no_zh.find(", zh: 用"), 9, "");
  EXPECT_FALSE(Glossary::FromYaml(no_zh, "g").ok());
  std::string bad_kind = std::string(ok);
  bad_kind.replace(bad_kind.find("concept"), 7, "thing");
  EXPECT_FALSE(Glossary::FromYaml(bad_kind, "g").ok());
  auto related = Glossary::FromYaml(std::string(ok) + "  related: [nope]\n", "g");
  ASSERT_FALSE(related.ok());
  EXPECT_NE(related.status().message().find("nope"), std::string::npos);
  EXPECT_FALSE(Glossary::FromYaml(std::string(ok) + ok, "g").ok());  // duplicate id
}

TEST(TermSearch, ExactBothDirections) {
  EXPECT_EQ(First("spot instance"), "spot_instance");
  EXPECT_EQ(First("抢占式实例"), "spot_instance");
  EXPECT_EQ(First("竞价实例"), "spot_instance");  // an alias
  EXPECT_EQ(First("临时存储（实例销毁即清空）"), "ephemeral_storage");
  EXPECT_EQ(First("NCCL_IB_DISABLE"), "nccl_ib_disable");
  EXPECT_EQ(First("nccl ib disable"), "nccl_ib_disable");
  EXPECT_EQ(First("禁用 InfiniBand"), "nccl_ib_disable");
  TermResults r = Search("Spot Instance");
  ASSERT_EQ(r.terms.size(), 1u);
  EXPECT_EQ(r.terms[0].kind, TermMatchKind::kExact);
  EXPECT_TRUE(HasKb(r, "run.preempted"));
}

TEST(TermSearch, PrefixAndFuzzy) {
  TermResults p = Search("NCCL_SOCK");
  ASSERT_FALSE(p.terms.empty());
  EXPECT_EQ(p.terms[0].entry->id, "nccl_socket_ifname");
  EXPECT_EQ(p.terms[0].kind, TermMatchKind::kPrefix);
  TermResults f = Search("persistance mode");
  ASSERT_FALSE(f.terms.empty());
  EXPECT_EQ(f.terms[0].entry->id, "persistence_mode");
  EXPECT_EQ(f.terms[0].kind, TermMatchKind::kFuzzy);
  EXPECT_EQ(First("抢占实例"), "spot_instance");  // one character missing
  EXPECT_EQ(First("gradient acumulation"), "gradient_accumulation");
}

TEST(TermSearch, ChineseScenarioPhraseFindsTermsAndKbEntries) {
  TermResults r = Search("多节点训练中断");
  EXPECT_TRUE(HasKb(r, "nccl.watchdog_timeout")) << r.kb.size();
  EXPECT_TRUE(HasTerm(r, "nccl_timeout"));
  ASSERT_FALSE(r.terms.empty());
  EXPECT_EQ(r.terms[0].kind, TermMatchKind::kPhrase);
  TermResults shm = Search("共享内存不足");
  EXPECT_TRUE(HasTerm(shm, "shared_memory"));
  TermResults en = Search("dataloader worker killed");
  EXPECT_TRUE(HasKb(en, "dataloader.worker_killed"));
}

TEST(TermSearch, EmptyAndUnknown) {
  auto empty = SearchTerms(Glossary::Default(), KnowledgeBase::Default(), " _- ");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().msg_id(), "term.empty_query");
  TermResults none = Search("xyzzyqwv plugh");
  EXPECT_TRUE(none.terms.empty());
  EXPECT_TRUE(none.kb.empty());
}

TEST(TermFormat, ParameterNamesStayEnglish) {
  const GlossaryEntry* e = Glossary::Default().Find("nccl_ib_disable");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->Heading(Lang::kZh), "NCCL_IB_DISABLE（禁用 InfiniBand）");
  EXPECT_EQ(e->Heading(Lang::kEn), "NCCL_IB_DISABLE");
  TermResults r = Search("禁用 InfiniBand");
  std::string zh = FormatTermResults(r, Glossary::Default(), Lang::kZh, false);
  EXPECT_NE(zh.find("NCCL_IB_DISABLE ↔ 禁用 InfiniBand"), std::string::npos) << zh;
  EXPECT_NE(zh.find("参数名"), std::string::npos);
  Json j = TermResultsToJson(r, "禁用 InfiniBand", Lang::kEn);
  EXPECT_EQ(j["terms"][0]["en"], "NCCL_IB_DISABLE");
  EXPECT_EQ(j["terms"][0]["kind"], "param");
  EXPECT_EQ(j["terms"][0]["match"], "exact");
}

}  // namespace
}  // namespace lathe::doctor
