#include "lathe/run/log_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "lathe/os/test_util/fake_clock.h"
#include "lathe/run/log_format.h"

namespace lathe::run {
namespace {

// A file on a disk of `capacity` bytes: a write takes what fits, then fails
// with ENOSPC, as write(2) does on a full file system.
struct Disk {
  std::string content;
  size_t capacity = SIZE_MAX;
  int appends = 0;
  bool holes = true;     // the file system can punch holes
  uint64_t punched = 0;  // bytes given back
};

class FakeFile final : public LogFile {
 public:
  explicit FakeFile(Disk& d) : d_(d) {}
  ssize_t Append(std::string_view data) override {
    ++d_.appends;
    size_t room = d_.capacity > d_.content.size() ? d_.capacity - d_.content.size() : 0;
    if (room == 0) return -ENOSPC;
    size_t n = std::min(room, data.size());
    d_.content.append(data.substr(0, n));
    return static_cast<ssize_t>(n);
  }
  int Truncate(uint64_t size) override {
    if (size > d_.content.size()) return -EINVAL;
    d_.content.resize(size);
    return 0;
  }
  int PunchHole(uint64_t offset, uint64_t len) override {
    if (!d_.holes) return -EOPNOTSUPP;
    if (offset + len > d_.content.size() || offset % 4096 != 0 || len % 4096 != 0) return -EINVAL;
    std::fill_n(d_.content.begin() + static_cast<std::ptrdiff_t>(offset), len, '\0');
    d_.punched += len;
    return 0;
  }

 private:
  Disk& d_;
};

std::string Line(int i) {
  return FormatLogRecord(1'000'000'000LL * i, "stdout", false, "line " + std::to_string(i));
}

std::string Lines(int from, int to) {
  std::string s;
  for (int i = from; i < to; ++i) s += Line(i);
  return s;
}

// Every line of the file is a whole, well-formed record; returns their contents.
std::vector<std::string> Contents(const std::string& file) {
  std::vector<std::string> out;
  EXPECT_TRUE(file.empty() || file.back() == '\n') << "torn last record: " << file;
  size_t pos = 0;
  while (pos < file.size()) {
    size_t nl = file.find('\n', pos);
    if (nl == std::string::npos) break;
    std::string_view line = std::string_view(file).substr(pos, nl - pos);
    auto rec = ParseLogRecord(line);
    EXPECT_TRUE(rec.has_value()) << "malformed record: " << line;
    if (rec) {
      // A record merged into another would show a second timestamp inside.
      EXPECT_EQ(std::string(rec->content).find("Z stdout"), std::string::npos) << line;
      out.emplace_back(rec->content);
    }
    pos = nl + 1;
  }
  return out;
}

std::vector<std::string> Expected(int from, int to) {
  std::vector<std::string> v;
  for (int i = from; i < to; ++i) v.push_back("line " + std::to_string(i));
  return v;
}

struct Fixture {
  Disk disk;
  os::FakeClock clock;
  LogWriter writer;
  explicit Fixture(LogWriterOptions o = {})
      : writer(std::make_unique<FakeFile>(disk), 0, clock, o) {}
};

TEST(LogWriter, WritesRecordsThrough) {
  Fixture f;
  f.writer.Append(Lines(0, 3));
  EXPECT_EQ(f.disk.content, Lines(0, 3));
  EXPECT_FALSE(f.writer.holding());
  EXPECT_EQ(f.writer.lost_bytes(), 0u);
}

TEST(LogWriter, ShortWriteIsCompletedBeforeTheNextRecord) {
  Fixture f;
  f.disk.capacity = Line(0).size() + 5;  // the disk fills inside record 1
  f.writer.Append(Lines(0, 2));
  EXPECT_TRUE(f.writer.holding());
  f.writer.Append(Lines(2, 4));  // behind the held rest of record 1
  EXPECT_EQ(f.disk.content.size(), f.disk.capacity);
  f.disk.capacity = SIZE_MAX;  // space freed
  EXPECT_TRUE(f.writer.Flush());
  EXPECT_EQ(f.disk.content, Lines(0, 4));
  EXPECT_EQ(Contents(f.disk.content), Expected(0, 4));
}

TEST(LogWriter, FullHoldBufferHoldsTheRunBackThenEverythingIsWritten) {
  LogWriterOptions o;
  o.max_held_bytes = 10 * Line(0).size();
  o.max_stall_ms = 60000;
  Fixture f(o);
  f.writer.Append(Lines(0, 2));
  f.disk.capacity = f.disk.content.size();  // full
  int i = 2;
  while (f.writer.Accepting() && i < 1000) f.writer.Append(Line(i++));
  ASSERT_LT(i, 1000) << "never held back";
  EXPECT_GE(f.writer.held_bytes(), o.max_held_bytes);
  f.writer.Append(Line(i++));  // read before the monitor saw it full: held, not dropped
  EXPECT_EQ(f.writer.lost_bytes(), 0u);
  f.clock.Advance(o.max_stall_ms - 1);
  EXPECT_FALSE(f.writer.Accepting());
  EXPECT_FALSE(f.writer.Flush());
  f.disk.capacity = SIZE_MAX;
  EXPECT_TRUE(f.writer.Flush());
  EXPECT_TRUE(f.writer.Accepting());
  EXPECT_EQ(Contents(f.disk.content), Expected(0, i));
  EXPECT_EQ(f.writer.lost_bytes(), 0u);
}

TEST(LogWriter, AfterTheStallNewOutputIsDroppedAndMarked) {
  LogWriterOptions o;
  o.max_held_bytes = 4 * Line(10).size();
  o.max_stall_ms = 1000;
  Fixture f(o);
  f.disk.capacity = 0;
  int i = 10;
  while (f.writer.Accepting()) f.writer.Append(Line(i++));
  int held_until = i;
  f.clock.Advance(o.max_stall_ms);
  ASSERT_TRUE(f.writer.Accepting());  // the stall is over: reading resumes, output drops
  uint64_t dropped = 0;
  for (int k = 0; k < 5; ++k, ++i) {
    dropped += ("line " + std::to_string(i)).size() + 1;
    f.writer.Append(Line(i));
  }
  int dropped_until = i;
  EXPECT_EQ(f.writer.lost_bytes(), dropped);
  EXPECT_EQ(f.writer.lost_reason(), "disk full");
  f.disk.capacity = SIZE_MAX;
  EXPECT_TRUE(f.writer.Flush());
  f.writer.Append(Lines(i, i + 2));
  // The held records, the marker where the dropped ones were, then the new ones.
  std::vector<std::string> want = Expected(10, held_until);
  want.push_back("[lathe: " + std::to_string(dropped) + " bytes of output lost: disk full]");
  for (const auto& s : Expected(dropped_until, i + 2)) want.push_back(s);
  EXPECT_EQ(Contents(f.disk.content), want);
  EXPECT_NE(f.disk.content.find(" stderr F [lathe: "), std::string::npos);  // on stderr
}

TEST(LogWriter, AbandonCutsThePartialRecordAndMarksTheLoss) {
  Fixture f;
  f.writer.Append(Lines(0, 2));
  size_t boundary = f.disk.content.size();
  f.disk.capacity = boundary + 7;  // a few bytes of record 2 fit
  f.writer.Append(Lines(2, 5));
  ASSERT_EQ(f.disk.content.size(), boundary + 7);
  f.writer.Abandon();  // the monitor ends while the disk stays full
  EXPECT_FALSE(f.writer.holding());
  uint64_t lost = 3 * (std::string("line 2").size() + 1);
  EXPECT_EQ(f.writer.lost_bytes(), lost);
  // The torn start of record 2 is gone; the marker did not fit whole, so
  // none of it is there either.
  EXPECT_EQ(f.disk.content, Lines(0, 2));
  // With room for it, the marker follows the last whole record.
  Fixture g;
  g.writer.Append(Lines(0, 2));
  g.disk.capacity = g.disk.content.size() + 7;
  g.writer.Append(Lines(2, 5));
  g.disk.capacity = g.disk.content.size() - 7 + 120;  // room for the marker, not the rest
  g.writer.Abandon();
  std::vector<std::string> want = Expected(0, 2);
  want.push_back("[lathe: " + std::to_string(lost) + " bytes of output lost: disk full]");
  EXPECT_EQ(Contents(g.disk.content), want);
}

// The records of `file` outside its holes (runs of zero bytes), and whether
// the cap's marker is among them.
std::vector<std::string> Kept(const std::string& file) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < file.size()) {
    size_t nl = file.find('\n', pos);
    if (nl == std::string::npos) break;
    auto rec = ParseLogRecord(std::string_view(file).substr(pos, nl - pos));
    if (rec) out.emplace_back(rec->content);
    pos = nl + 1;
  }
  return out;
}

TEST(LogWriter, ACappedLogKeepsItsHeadAndItsNewestQuarter) {
  LogWriterOptions o;
  o.max_file_bytes = 64 * 1024;
  Fixture f(o);
  for (int i = 0; i < 20000; ++i) f.writer.Append(Line(i));
  const std::string& file = f.disk.content;
  // What the disk holds stays within the cap, whatever the run printed.
  EXPECT_LE(file.size() - f.disk.punched, o.max_file_bytes);
  EXPECT_GT(file.size(), 4 * o.max_file_bytes);  // offsets keep growing: followers keep their place
  EXPECT_EQ(f.writer.trimmed_bytes(), f.disk.punched);
  EXPECT_EQ(f.writer.lost_bytes(), 0u);
  std::vector<std::string> kept = Kept(file);
  ASSERT_FALSE(kept.empty());
  // The head from the first line, then the marker, then a gap, then the newest lines to the last.
  EXPECT_EQ(kept.front(), "line 0");
  EXPECT_EQ(kept.back(), "line 19999");
  size_t marker = 0;
  while (marker < kept.size() && kept[marker].find("run_log_max") == std::string::npos) ++marker;
  ASSERT_LT(marker, kept.size());
  EXPECT_EQ(kept[marker - 1], "line " + std::to_string(marker - 1));  // the head is whole
  EXPECT_GT(file.size() - file.rfind(std::string(4096, '\0')), o.max_file_bytes / 4);
}

TEST(LogWriter, WithoutHolesOutputPastTheCapIsDroppedAndCounted) {
  LogWriterOptions o;
  o.max_file_bytes = 64 * 1024;
  Fixture f(o);
  f.disk.holes = false;
  for (int i = 0; i < 20000; ++i) f.writer.Append(Line(i));
  EXPECT_LE(f.disk.content.size(), o.max_file_bytes + 4096);
  EXPECT_GT(f.writer.lost_bytes(), 0u);
  EXPECT_EQ(f.writer.lost_reason(), "the log reached its cap (run_log_max)");
  EXPECT_EQ(Kept(f.disk.content).front(), "line 0");
}

TEST(LogWriter, OutputBytesCountContentAndNewlines) {
  std::string recs = FormatLogRecord(0, "stdout", false, "abc") +
                     FormatLogRecord(0, "stderr", true, "xy") +
                     FormatLogRecord(0, "stderr", false, "");
  EXPECT_EQ(OutputBytesOf(recs), 4u + 2u + 1u);
  EXPECT_EQ(DescribeWriteError(ENOSPC), "disk full");
  EXPECT_EQ(DescribeWriteError(EDQUOT), "disk quota exceeded");
}

}  // namespace
}  // namespace lathe::run
