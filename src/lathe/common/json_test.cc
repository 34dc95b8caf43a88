#include "lathe/common/json.h"

#include <gtest/gtest.h>

#include <string>

#include "lathe/common/path_check.h"

namespace lathe {
namespace {

std::string Arg(const Status& s, const std::string& key) {
  for (const auto& a : s.args()) {
    if (a.key == key) return a.value;
  }
  return "<none>";
}

TEST(ParseJson, ParsesAndReportsTheOffsetOfASyntaxError) {
  auto j = ParseJson(R"({"a": [1, 2.5, "x", true, null], "b": {"c": -3}})");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["b"]["c"], -3);
  auto bad = ParseJson(R"({"command": [)");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().msg_id(), "json.malformed");
  EXPECT_GT(std::stoi(Arg(bad.status(), "offset")), 0);
  EXPECT_FALSE(ParseJson("").ok());
  EXPECT_FALSE(ParseJson("{} x").ok());
}

TEST(ParseJson, NumberOutOfRangeNamesItsField) {
  struct Case {
    const char* json;
    const char* field;
  };
  for (const Case& c :
       {Case{R"({"gpus": 1e400})", "gpus"}, Case{R"({"command": ["a", 1e400]})", "command[1]"},
        Case{R"({"env": {"A": "x", "FOO": -1E999}})", "env.FOO"},
        Case{R"({"a": [[0], {"b": 1e400}]})", "a[1].b"}, Case{R"(1e400)", "(top level)"}}) {
    auto j = ParseJson(c.json);
    ASSERT_FALSE(j.ok()) << c.json;
    EXPECT_TRUE(j.status().IsInvalidArgument());
    EXPECT_EQ(j.status().msg_id(), "json.number_out_of_range") << c.json;
    EXPECT_EQ(Arg(j.status(), "field"), c.field) << c.json;
    EXPECT_NE(j.status().message().find(c.field), std::string::npos) << j.status().message();
  }
  EXPECT_EQ(Arg(ParseJson(R"({"gpus": 1e400})").status(), "value"), "1e400");
}

TEST(ParseJson, DuplicateKeyIsRefusedNamingIt) {
  auto j = ParseJson(R"({"command": ["echo", "one"], "command": ["echo", "two"]})");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().msg_id(), "json.duplicate_key");
  EXPECT_EQ(Arg(j.status(), "field"), "command");
  auto nested = ParseJson(R"({"env": {"A": "1", "A": "2"}})");
  EXPECT_EQ(Arg(nested.status(), "field"), "env.A");
  EXPECT_TRUE(ParseJson(R"([{"a": 1}, {"a": 2}])").ok());
}

TEST(ParseJson, NestingBeyondTheLimitIsRefused) {
  std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(ParseJson(ok).ok());
  std::string deep = "{\"gpus\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto j = ParseJson(deep);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().msg_id(), "json.too_deep");
}

TEST(Json, IsValidUtf8AgreesWithTheSerializer) {
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("h\xc3\xa9 \xe4\xbd\xa0 \xf0\x9f\x98\x80"));
  for (const char* bad : {"\xff", "a\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"}) {
    EXPECT_FALSE(IsValidUtf8(bad)) << bad;
    EXPECT_THROW(Json(std::string(bad)).dump(), Json::type_error) << bad;
  }
}

TEST(PathCheck, NulLengthAndComponents) {
  EXPECT_TRUE(CheckPathName("/data/exp/ckpt", "to").ok());
  EXPECT_TRUE(CheckPathName("rel/ok", "to").ok());
  auto nul = CheckPathName(std::string("/tmp/a\0b", 8), "to");
  EXPECT_EQ(nul.msg_id(), "input.nul_byte");
  EXPECT_NE(nul.message().find("'to'"), std::string::npos);
  auto longp = CheckPathName("/" + std::string(5000, 'a'), "to");
  EXPECT_TRUE(longp.IsInvalidArgument());
  EXPECT_EQ(longp.msg_id(), "path.too_long");
  EXPECT_LT(longp.message().size(), 200u);  // does not quote 5,000 bytes back
  std::string parts;
  for (int i = 0; i < 10; ++i)
    parts += "/" + std::string(300, 'b');  // 3,010 bytes, each part too long
  EXPECT_EQ(CheckPathName(parts, "to").msg_id(), "path.name_too_long");
  EXPECT_TRUE(CheckPathName("/" + std::string(255, 'c'), "to").ok());
  EXPECT_EQ(CheckPathName("/" + std::string(256, 'c'), "to").msg_id(), "path.name_too_long");
  EXPECT_EQ(CheckNoNul(std::string("a\0b", 3), "command[1]").msg_id(), "input.nul_byte");
  EXPECT_TRUE(CheckNoNul("ab", "command[1]").ok());
}

}  // namespace
TEST(Json, AnAnswerParsesPlainlyAndMalformedTextIsAnError) {
  auto j = ParseJsonAnswer(R"({"runs": [{"id": "r1"}], "total": 1})");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["runs"][0]["id"], "r1");
  EXPECT_FALSE(ParseJsonAnswer("{\"runs\": [").ok());
  EXPECT_FALSE(ParseJsonAnswer("").ok());
}

TEST(StatusJson, OneFlatShapeWhoseErrorIsTheEnglishText) {
  Status s =
      Status::Msg(Code::kInvalidArgument, "spec.bad_size", {{"field", "memory"}, {"value", "16X"}});
  Json j = StatusToJson(s);
  ASSERT_TRUE(j["error"].is_string()) << j;  // KServe v2 asks for a string
  EXPECT_EQ(j["error"], s.message());
  EXPECT_EQ(j["code"], "invalid_argument");
  EXPECT_EQ(j["msg_id"], "spec.bad_size");
  EXPECT_EQ(j["args"], (Json{{"field", "memory"}, {"value", "16X"}}));
  EXPECT_EQ(j["en"], s.message());
  EXPECT_NE(j["zh"].get<std::string>().find("memory"), std::string::npos);
  EXPECT_NE(j["zh"], j["en"]);
  EXPECT_EQ(j.size(), 6u) << j;

  // Without a catalog id: no msg_id, no args.
  Json plain = StatusToJson(Status::NotFound("no such thing"));
  EXPECT_EQ(plain, (Json{{"error", "no such thing"},
                         {"code", "not_found"},
                         {"en", "no such thing"},
                         {"zh", "no such thing"}}));
}

TEST(StatusJson, RoundTripsAndReadsTheOldNestedShapeAndABareText) {
  Status s = Status::Msg(Code::kNotFound, "run.not_found", {{"run", "r12"}});
  Status back = StatusFromJson(StatusToJson(s), Code::kInternal);
  EXPECT_EQ(back.code(), Code::kNotFound);
  EXPECT_EQ(back.msg_id(), "run.not_found");
  EXPECT_EQ(Arg(back, "run"), "r12");
  EXPECT_EQ(back.message(), s.message());

  // An extra field (an SSE error event's "http") is ignored.
  Json event = StatusToJson(s);
  event["http"] = 404;
  EXPECT_EQ(StatusFromJson(event, Code::kInternal).msg_id(), "run.not_found");

  // A plain status keeps its text and code; an unknown id keeps the text.
  Status plain = StatusFromJson(StatusToJson(Status::Unavailable("try later")), Code::kInternal);
  EXPECT_EQ(plain.code(), Code::kUnavailable);
  EXPECT_EQ(plain.message(), "try later");
  EXPECT_TRUE(plain.msg_id().empty());
  Status unknown =
      StatusFromJson(Json{{"error", "newer text"}, {"code", "not_found"}, {"msg_id", "no.such.id"}},
                     Code::kInternal);
  EXPECT_EQ(unknown.code(), Code::kNotFound);
  EXPECT_EQ(unknown.message(), "newer text");

  // An older daemon's nested shape.
  Json old = {{"error",
               {{"code", "not_found"},
                {"id", "run.not_found"},
                {"args", {{"run", "r7"}}},
                {"message", "no run with id or name 'r7'"},
                {"en", "no run with id or name 'r7'"},
                {"zh", "…"}}}};
  Status o = StatusFromJson(old, Code::kInternal);
  EXPECT_EQ(o.code(), Code::kNotFound);
  EXPECT_EQ(o.msg_id(), "run.not_found");
  EXPECT_EQ(Arg(o, "run"), "r7");
  Status old_plain = StatusFromJson(
      Json{{"error", {{"code", "unavailable"}, {"message", "stopping"}}}}, Code::kInternal);
  EXPECT_EQ(old_plain.code(), Code::kUnavailable);
  EXPECT_EQ(old_plain.message(), "stopping");

  // The HTTP layer's own answer: only "error"; the code is the caller's.
  Status bare = StatusFromJson(Json{{"error", "request body too large"}}, Code::kResourceExhausted);
  EXPECT_EQ(bare.code(), Code::kResourceExhausted);
  EXPECT_EQ(bare.message(), "request body too large");
  // Not an error body at all.
  EXPECT_EQ(StatusFromJson(Json("gateway timeout"), Code::kUnavailable).message(),
            "gateway timeout");
}

}  // namespace lathe
