#include "lathe/exec/container/containerfile.h"

#include <gtest/gtest.h>

namespace lathe::exec {
namespace {

std::string Arg(const Status& s, const std::string& key) {
  for (const auto& a : s.args()) {
    if (a.key == key) return a.value;
  }
  return "";
}

std::vector<std::string> Refs(std::string_view text) {
  auto r = ContainerfileBases(text);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> out;
  if (r.ok()) {
    for (const auto& b : *r) out.push_back(b.ref);
  }
  return out;
}

TEST(Containerfile, FindsEachImageOnceAndSkipsStagesAndScratch) {
  EXPECT_EQ(Refs("FROM pytorch\nRUN echo hi\n"), std::vector<std::string>{"pytorch"});
  EXPECT_EQ(Refs("# a comment\nfrom --platform=linux/amd64 127.0.0.1:5000/bb:1 AS build\n"
                 "RUN make\nFROM build\nCOPY --from=build /a /a\nFROM scratch\n"
                 "COPY --from=tools:2 /bin/x /x\nCOPY --from=0 /y /y\nFROM tools:2\n"),
            (std::vector<std::string>{"127.0.0.1:5000/bb:1", "tools:2"}));
}

TEST(Containerfile, FollowsContinuationsCommentsAndTheEscapeDirective) {
  EXPECT_EQ(Refs("FROM \\\n  base:1 \\\n  AS one\nRUN a \\\n# FROM not-this\n  b\n"),
            std::vector<std::string>{"base:1"});
  EXPECT_EQ(Refs("# escape=`\nFROM `\n  win:1\nRUN dir c:\\\n"), std::vector<std::string>{"win:1"});
  EXPECT_EQ(Refs("FROM a\r\nRUN x\r\n"), std::vector<std::string>{"a"});
}

TEST(Containerfile, SubstitutesGlobalArgDefaults) {
  EXPECT_EQ(Refs("ARG BASE=pytorch TAG=\"2\"\nFROM ${BASE}:$TAG\n"),
            std::vector<std::string>{"pytorch:2"});
  auto missing = ContainerfileBases("ARG BASE\nRUN x\nFROM $BASE\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().msg_id(), "image.build_bad_from");
  EXPECT_EQ(Arg(missing.status(), "line"), "3");
  // An ARG after the first FROM is the stage's, not a default for a FROM.
  EXPECT_FALSE(ContainerfileBases("FROM a\nARG B=b\nFROM $B\n").ok());
}

TEST(Containerfile, RefusesAFromWithoutAnImage) {
  auto r = ContainerfileBases("RUN x\nFROM --platform=linux/amd64\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Arg(r.status(), "line"), "2");
  EXPECT_TRUE(Refs("").empty());
  EXPECT_TRUE(Refs("\\").empty());
}

}  // namespace
}  // namespace lathe::exec
