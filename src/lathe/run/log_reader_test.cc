#include "lathe/run/log_reader.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <random>

#include "lathe/os/files.h"
#include "lathe/run/log_format.h"

namespace lathe::run {
namespace {

class LogReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-log-reader-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/log";
  }
  void TearDown() override { (void)os::RemoveAll(dir_); }

  void Write(const std::string& text) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << text;
  }
  void Append(const std::string& text) {
    std::ofstream(path_, std::ios::binary | std::ios::app) << text;
  }

  // Reads with `q`; fails the test on an error. `next` gets next_offset().
  std::string Read(const LogQuery& q, std::optional<int64_t>* next = nullptr) {
    auto r = LogReader::Open(path_, q);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return "";
    if (next) *next = (*r)->next_offset();
    std::string out;
    Status s = (*r)->Read([&](std::string_view chunk) {
      EXPECT_LE(chunk.size(), kLogChunkBytes + kMaxLogLineBytes + 64);
      out.append(chunk);
      return true;
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

  std::string dir_, path_;
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

std::string Join(const std::vector<std::string>& lines, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to && i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}

LogQuery Tail(int64_t n, std::string grep = "") {
  LogQuery q;
  q.tail = n;
  q.grep = std::move(grep);
  return q;
}

LogQuery Page(int64_t offset, std::optional<int64_t> limit, std::string grep = "") {
  LogQuery q;
  q.offset = offset;
  q.limit = limit;
  q.grep = std::move(grep);
  return q;
}

std::string Rec(std::string_view stream, bool partial, std::string_view text, int64_t ns = 0) {
  return FormatLogRecord(ns, stream, partial, text);
}

// Records as the monitor writes them, stdout and stderr interleaved, lines
// split into P pieces, a stray malformed line and an unfinished record at the end.
std::string RandomLog(uint32_t seed, int records) {
  std::mt19937 rng(seed);
  std::string log;
  for (int i = 0; i < records; ++i) {
    const char* stream = rng() % 4 == 0 ? "stderr" : "stdout";
    bool partial = rng() % 5 == 0;
    std::string text = (rng() % 3 == 0 ? "error " : "info ") + std::to_string(i) +
                       std::string(rng() % (rng() % 50 == 0 ? 3000 : 60), 'x');
    log += Rec(stream, partial, text, i);
    if (rng() % 997 == 0) log += "not a record\n";
  }
  return log + Rec("stdout", false, "unfinished").substr(0, 20);
}

TEST_F(LogReaderTest, WholeLogEqualsRenderLog) {
  std::string log = RandomLog(1, 20000);
  ASSERT_GT(log.size(), 8 * kLogBlockBytes);
  Write(log);
  EXPECT_EQ(Read(LogQuery{}), RenderLog(log, false));
  LogQuery ts;
  ts.timestamps = true;
  EXPECT_EQ(Read(ts), RenderLog(log, true));
}

// numbers=1 gives each line its number in the whole log, whatever the
// page or the grep, and CountLogLines agrees with the lines rendered.
TEST_F(LogReaderTest, NumbersAreTheLinesPlaceInTheWholeLog) {
  const std::string log = RandomLog(7, 20000);
  Write(log);
  const std::vector<std::string> lines = Lines(RenderLog(log, false));
  auto stats = CountLogLines(path_);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->lines, static_cast<int64_t>(lines.size()));
  EXPECT_EQ(stats->bytes, log.size());
  LogQuery q = Page(12345, 3);
  q.numbers = true;
  EXPECT_EQ(Read(q), "12345\t" + lines[12345] + "\n12346\t" + lines[12346] + "\n12347\t" +
                         lines[12347] + "\n");
  q = Page(0, std::nullopt, "^error 1999[0-9]");
  q.numbers = true;
  const std::string hits = Read(q);
  ASSERT_FALSE(hits.empty());
  for (const std::string& line : Lines(hits)) {
    size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos);
    EXPECT_EQ(lines[std::stoul(line.substr(0, tab))], line.substr(tab + 1));
  }
  auto missing = CountLogLines(dir_ + "/none");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->lines, 0);
}

TEST_F(LogReaderTest, MissingLogReadsAsEmpty) {
  EXPECT_EQ(Read(LogQuery{}), "");
  EXPECT_EQ(Read(Tail(5)), "");
  std::optional<int64_t> next;
  EXPECT_EQ(Read(Page(3, 10), &next), "");
  EXPECT_EQ(next, 3);
}

TEST_F(LogReaderTest, TailAcrossBlockBoundaries) {
  std::string log;
  for (int i = 0; i < 30000; ++i) log += Rec("stdout", false, "line " + std::to_string(i));
  ASSERT_GT(log.size(), 10 * kLogBlockBytes);
  Write(log);
  auto all = Lines(RenderLog(log, false));
  for (int64_t n : std::vector<int64_t>{0, 1, 2, 1000, 1600, 1700, 29999, 30000, 40000}) {
    size_t from = all.size() - std::min<size_t>(n, all.size());
    EXPECT_EQ(Read(Tail(n)), Join(all, from, all.size())) << "tail " << n;
  }
}

TEST_F(LogReaderTest, TailJoinsPartialRecordsOfInterleavedStreams) {
  // The pieces of one stdout line with stderr lines between them.
  Write(Rec("stdout", true, "a") + Rec("stderr", false, "x") + Rec("stdout", true, "b") +
        Rec("stderr", false, "y") + Rec("stdout", false, "c") + Rec("stdout", true, "unfinished"));
  EXPECT_EQ(Read(Tail(1)), "abc\n");
  EXPECT_EQ(Read(Tail(2)), "y\nabc\n");
  EXPECT_EQ(Read(Tail(3)), "x\ny\nabc\n");
  EXPECT_EQ(Read(Tail(9)), "x\ny\nabc\n");
}

TEST_F(LogReaderTest, TailOfLinesSplitAcrossBlocks) {
  // 100 KiB lines in 16 KiB pieces: every line spans block boundaries.
  std::string log, want;
  for (int i = 0; i < 8; ++i) {
    std::string line = std::to_string(i) + std::string(100 * 1024, 'a' + i);
    for (size_t p = 0; p < line.size(); p += kMaxLineBytes) {
      bool last = p + kMaxLineBytes >= line.size();
      log += Rec(i % 2 ? "stderr" : "stdout", !last, line.substr(p, kMaxLineBytes));
    }
    if (i >= 5) want += line + "\n";
  }
  Write(log);
  EXPECT_EQ(Read(Tail(3)), want);
  EXPECT_EQ(Read(LogQuery{}), RenderLog(log, false));
}

TEST_F(LogReaderTest, RandomLogsTailPageAndGrepAgreeWithRenderLog) {
  for (uint32_t seed = 2; seed < 6; ++seed) {
    std::string log = RandomLog(seed, 6000);
    Write(log);
    auto all = Lines(RenderLog(log, false));
    for (int64_t n : std::vector<int64_t>{1, 7, 500, 3000, static_cast<int64_t>(all.size())}) {
      size_t from = all.size() - std::min<size_t>(n, all.size());
      EXPECT_EQ(Read(Tail(n)), Join(all, from, all.size())) << "seed " << seed << " tail " << n;
    }
    std::vector<std::string> errors;
    for (const auto& l : all) {
      if (l.rfind("error ", 0) == 0) errors.push_back(l);
    }
    ASSERT_GT(errors.size(), 100u);
    EXPECT_EQ(Read(Tail(50, "^error ")), Join(errors, errors.size() - 50, errors.size()));
    EXPECT_EQ(Read(Tail(100000, "^error ")), Join(errors, 0, errors.size()));
    std::optional<int64_t> next;
    EXPECT_EQ(Read(Page(1234, 321), &next), Join(all, 1234, 1234 + 321)) << "seed " << seed;
    EXPECT_EQ(next, 1234 + 321);
  }
}

TEST_F(LogReaderTest, PagingReachesTheEnd) {
  std::string log = RandomLog(7, 9000);
  Write(log);
  std::string whole = RenderLog(log, false);
  int64_t total = static_cast<int64_t>(Lines(whole).size());
  std::string paged;
  int64_t offset = 0, pages = 0;
  while (true) {
    std::optional<int64_t> next;
    std::string page = Read(Page(offset, 1000), &next);
    ASSERT_TRUE(next.has_value());
    paged += page;
    ++pages;
    if (*next == offset) break;  // nothing more
    EXPECT_EQ(*next - offset, static_cast<int64_t>(Lines(page).size()));
    offset = *next;
    ASSERT_LT(pages, 100);
  }
  EXPECT_EQ(paged, whole);
  EXPECT_EQ(offset, total);
  // Past the end: nothing, and the next offset stays where it was asked.
  std::optional<int64_t> next;
  EXPECT_EQ(Read(Page(total + 50, 10), &next), "");
  EXPECT_EQ(next, total + 50);
  EXPECT_EQ(Read(Page(5, 0), &next), "");
  EXPECT_EQ(next, 5);
  // An offset alone reads to the end.
  EXPECT_EQ(Read(Page(total - 3, std::nullopt), &next), Join(Lines(whole), total - 3, total));
  EXPECT_EQ(next, total);
}

TEST_F(LogReaderTest, GrepWithPagingCountsMatchesAndNumbersAllLines) {
  std::string log;
  for (int i = 0; i < 5000; ++i)
    log += Rec("stdout", false, (i % 10 == 0 ? "ERR " : "ok ") + std::to_string(i));
  Write(log);
  std::optional<int64_t> next;
  // Lines 0, 10, 20: the third match is line 20, so the next page starts at 21.
  EXPECT_EQ(Read(Page(0, 3, "ERR"), &next), "ERR 0\nERR 10\nERR 20\n");
  EXPECT_EQ(next, 21);
  EXPECT_EQ(Read(Page(21, 2, "ERR"), &next), "ERR 30\nERR 40\n");
  EXPECT_EQ(next, 41);
  EXPECT_EQ(Read(Page(4985, 10, "ERR"), &next), "ERR 4990\n");
  EXPECT_EQ(next, 5000);
  EXPECT_EQ(Read(Tail(2, "ERR 4[0-9]{3}$")), "ERR 4980\nERR 4990\n");
  EXPECT_EQ(Read(Tail(3, "nothing matches this")), "");
  LogQuery g;
  g.grep = "^ok 499[89]$";
  EXPECT_EQ(Read(g), "ok 4998\nok 4999\n");
}

TEST_F(LogReaderTest, AHugeLineIsCutAndTheRestStillReads) {
  // One record far longer than a block or the kept text (a hand-written log).
  std::string huge(3 * kMaxLogLineBytes + 12345, 'h');
  std::string log =
      Rec("stdout", false, "before") + Rec("stdout", false, huge) + Rec("stderr", false, "after");
  Write(log);
  std::string want_huge = std::string(kMaxLogLineBytes, 'h') + "…(+" +
                          std::to_string(huge.size() - kMaxLogLineBytes) + " B)";
  EXPECT_EQ(Read(LogQuery{}), "before\n" + want_huge + "\nafter\n");
  EXPECT_EQ(Read(Tail(2)), want_huge + "\nafter\n");
  EXPECT_EQ(Read(Tail(1)), "after\n");
  std::optional<int64_t> next;
  EXPECT_EQ(Read(Page(2, 1), &next), "after\n");
  EXPECT_EQ(next, 3);
  EXPECT_EQ(Read(Tail(5, "^h+")), want_huge + "\n");
  // The same length joined from P pieces is cut the same way.
  std::string pieces;
  for (size_t p = 0; p < huge.size(); p += kMaxLineBytes) {
    pieces += Rec("stdout", p + kMaxLineBytes < huge.size(), huge.substr(p, kMaxLineBytes));
  }
  Write(pieces + Rec("stdout", false, "after"));
  EXPECT_EQ(Read(LogQuery{}), want_huge + "\nafter\n");
  EXPECT_EQ(Read(Tail(2)), want_huge + "\nafter\n");
}

TEST_F(LogReaderTest, TimestampsAreThoseOfTheFirstPiece) {
  Write(Rec("stdout", true, "a", 1'000'000'000) + Rec("stdout", false, "b", 2'000'000'000) +
        Rec("stderr", false, "c", 3'000'000'000));
  LogQuery q = Tail(2);
  q.timestamps = true;
  EXPECT_EQ(Read(q), "1970-01-01T00:00:01.000000000Z ab\n1970-01-01T00:00:03.000000000Z c\n");
}

TEST_F(LogReaderTest, PollFollowsFromTheTailAsTheLogGrows) {
  std::string log;
  for (int i = 0; i < 5000; ++i) log += Rec("stdout", false, "l" + std::to_string(i));
  std::string cut = Rec("stdout", false, "next");
  Write(log + cut.substr(0, 15));  // a record half written
  auto r = LogReader::Open(path_, Tail(2));
  ASSERT_TRUE(r.ok());
  std::vector<std::string> got;
  auto collect = [&](std::string_view l) {
    got.emplace_back(l);
    return true;
  };
  ASSERT_TRUE((*r)->Poll(collect).ok());
  EXPECT_EQ(got, (std::vector<std::string>{"l4998", "l4999"}));
  Append(cut.substr(15) + Rec("stderr", true, "x"));
  ASSERT_TRUE((*r)->Poll(collect).ok());
  Append(Rec("stderr", false, "y"));
  ASSERT_TRUE((*r)->Poll(collect).ok());
  EXPECT_EQ(got, (std::vector<std::string>{"l4998", "l4999", "next", "xy"}));
}

TEST_F(LogReaderTest, PollOpensALogThatAppearsLater) {
  auto r = LogReader::Open(path_, LogQuery{});
  ASSERT_TRUE(r.ok());
  int lines = 0;
  auto count = [&](std::string_view) { return ++lines, true; };
  ASSERT_TRUE((*r)->Poll(count).ok());
  EXPECT_EQ(lines, 0);
  Write(Rec("stdout", false, "hello"));
  ASSERT_TRUE((*r)->Poll(count).ok());
  EXPECT_EQ(lines, 1);
}

TEST_F(LogReaderTest, ReadStopsWhenTheSinkSaysSo) {
  std::string log;
  for (int i = 0; i < 100000; ++i) log += Rec("stdout", false, "line " + std::to_string(i));
  Write(log);
  auto r = LogReader::Open(path_, LogQuery{});
  ASSERT_TRUE(r.ok());
  int calls = 0;
  ASSERT_TRUE((*r)->Read([&](std::string_view) { return ++calls < 2; }).ok());
  EXPECT_EQ(calls, 2);
}

// A tail reads from the end only: behind these lines lies a 64 GiB hole
// (sparse, all zero bytes) that a reader going through the whole file would
// spend minutes on. A stderr line whose stream has no earlier record looks
// back no further than kLogJoinGapBytes for pieces to join.
TEST_F(LogReaderTest, TailReadsBackwardsFromTheEndOnly) {
  std::string lines = "\n";
  for (int i = 0; i < 100000; ++i)
    lines += Rec("stdout", false, (i % 2 ? "odd " : "even ") + std::to_string(i));
  ASSERT_GT(lines.size(), kLogJoinGapBytes);
  lines += Rec("stderr", false, "last");
  Write("");
  ASSERT_EQ(truncate(path_.c_str(), 64LL << 30), 0);
  Append(lines);
  EXPECT_EQ(Read(Tail(2)), "odd 99999\nlast\n");
  EXPECT_EQ(Read(Tail(3, "^even")), "even 99994\neven 99996\neven 99998\n");
  auto r = LogReader::Open(path_, Tail(1));
  ASSERT_TRUE(r.ok());
  std::vector<std::string> got;
  ASSERT_TRUE((*r)->Poll([&](std::string_view l) { return got.emplace_back(l), true; }).ok());
  EXPECT_EQ(got, std::vector<std::string>{"last"});
}

TEST_F(LogReaderTest, RenderLogEndReadsOnlyTheEnd) {
  EXPECT_EQ(RenderLogEnd(path_, 1024).value_or("x"), "");
  std::string lines;
  for (int i = 0; i < 1000; ++i) lines += Rec("stdout", false, "line " + std::to_string(i));
  Write("");
  ASSERT_EQ(truncate(path_.c_str(), 64LL << 30),
            0);  // a hole no reader of the whole file gets through
  Append("\n" + lines);
  auto end = RenderLogEnd(path_, 3 * Rec("stdout", false, "line 999").size() - 5);
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_EQ(*end, "line 998\nline 999\n");  // line 997 begins before the last bytes
  Write(lines);
  EXPECT_EQ(RenderLogEnd(path_, 1 << 20).value_or(""), RenderLog(lines, false));
}

using Params = std::map<std::string, std::string>;

Result<LogQuery> Parse(const Params& p, bool follow = false) {
  return ParseLogQuery(
      [&](std::string_view name) -> std::optional<std::string> {
        auto it = p.find(std::string(name));
        if (it == p.end()) return std::nullopt;
        return it->second;
      },
      follow);
}

TEST(LogQuery, ParsesAndChecksParameters) {
  auto q = Parse({{"tail", "10"}, {"grep", "a|b"}, {"timestamps", "1"}});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->tail, 10);
  EXPECT_EQ(q->grep, "a|b");
  EXPECT_TRUE(q->timestamps);
  q = Parse({{"offset", "0"}, {"limit", "10000000"}});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->offset, 0);
  EXPECT_EQ(q->limit, kMaxLogLines);
  for (const auto& [param, value] :
       std::vector<std::pair<std::string, std::string>>{{"tail", "-1"},
                                                        {"tail", "ten"},
                                                        {"tail", ""},
                                                        {"tail", "1e3"},
                                                        {"tail", "+5"},
                                                        {"tail", "10000001"},
                                                        {"limit", "99999999999999999999999"},
                                                        {"limit", "5 "},
                                                        {"offset", "1000000000001"},
                                                        {"offset", "0x10"}}) {
    auto bad = Parse({{param, value}});
    ASSERT_FALSE(bad.ok()) << param << "=" << value;
    EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(bad.status().msg_id(), "logs.bad_number");
    EXPECT_NE(bad.status().message().find("'" + param + "'"), std::string::npos)
        << bad.status().message();
  }
  auto re = Parse({{"grep", "(unclosed"}});
  ASSERT_FALSE(re.ok());
  EXPECT_EQ(re.status().msg_id(), "logs.bad_grep");
  EXPECT_NE(re.status().message().find("'grep'"), std::string::npos);
  EXPECT_EQ(Parse({{"grep", std::string(kMaxLogGrepBytes + 1, 'a')}}).status().msg_id(),
            "logs.grep_too_long");
  EXPECT_EQ(Parse({{"tail", "1"}, {"offset", "2"}}).status().msg_id(), "logs.conflict");
  EXPECT_EQ(Parse({{"tail", "1"}, {"limit", "2"}}).status().msg_id(), "logs.conflict");
  EXPECT_EQ(Parse({{"limit", "2"}}, true).status().msg_id(), "logs.conflict");
  EXPECT_TRUE(Parse({{"tail", "2"}, {"grep", "x"}}, true).ok());
}

}  // namespace
}  // namespace lathe::run
