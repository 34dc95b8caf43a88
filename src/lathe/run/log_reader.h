// Reading a run's log (the CRI records of log_format.h) in bounded memory,
// for GET /api/v1/runs/{run}/logs: the whole log, the last N lines, a page of
// lines by number, the lines matching a regular expression, and following the
// log as it grows.
//
// Lines are what LogRenderer makes of the records: partial (P) records joined
// per stream, one line per full (F) record, numbered from 0 in the order of
// their F records; malformed records are skipped.
//
// Memory, whatever the size of the log: one read block (kLogBlockBytes), the
// line being joined on each stream (at most kMaxLogLineBytes of text each: the
// rest of a longer line is left out and the line ends with "…(+N B)", N the
// bytes left out), and the output gathered up to kLogChunkBytes (plus one line)
// before each call of the sink. Nothing is indexed: a tail is found by reading
// backwards from the end in blocks, a page by reading forwards from the start.
//
// One limit of reading backwards: a tail joins the pieces of a line only while
// no more than kLogJoinGapBytes of the other stream's records lie between two
// of them (a line whose pieces are farther apart starts at the nearer piece).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "lathe/common/status.h"
#include "lathe/os/random_access_file.h"

namespace re2 {
class RE2;
}

namespace lathe::run {

constexpr size_t kLogBlockBytes = 64 * 1024;          // one read of the file
constexpr size_t kLogChunkBytes = 64 * 1024;          // output handed to the sink at a time
constexpr size_t kMaxLogLineBytes = 1 << 20;          // text kept of one line
constexpr uint64_t kLogJoinGapBytes = 4 << 20;        // see the file comment
constexpr int64_t kMaxLogLines = 10'000'000;          // the most `tail` and `limit` take
constexpr int64_t kMaxLogOffset = 1'000'000'000'000;  // the most `offset` takes
constexpr size_t kMaxLogGrepBytes = 1024;             // the longest `grep` pattern

struct LogQuery {
  bool timestamps = false;        // each line starts with the time of its first piece and a space
  bool numbers = false;           // each line starts with its number and a tab (not with tail)
  std::optional<int64_t> tail;    // the last N lines (of those matching `grep`)
  std::optional<int64_t> offset;  // from line number K on (0-based, counting every line)
  std::optional<int64_t> limit;   // at most M lines (of those matching `grep`)
  std::string grep;               // an RE2 pattern searched in each line's text; "" = every line
};

// Reads and checks the query parameters `timestamps`, `tail`, `offset`,
// `limit` and `grep` through `param` (nullopt when absent). Errors are
// InvalidArgument naming the parameter and what it allows: logs.bad_number,
// logs.bad_grep, logs.grep_too_long, and logs.conflict for `tail` with
// `offset` or `limit`, and (with `follow`) `limit` with follow.
Result<LogQuery> ParseLogQuery(
    const std::function<std::optional<std::string>(std::string_view)>& param, bool follow);

// What the program printed in about the last `bytes` of the log at `path`
// (from the first record that starts within them), rendered as RenderLog
// does; reads only those bytes. "" for a log that does not exist.
Result<std::string> RenderLogEnd(const std::string& path, size_t bytes);

// How long the log at `path` is: its lines (as numbered above) and bytes.
// Reads the whole log once; a log that does not exist is {0, 0}.
struct LogStats {
  int64_t lines = 0;
  uint64_t bytes = 0;
};
Result<LogStats> CountLogLines(const std::string& path);

// One answer to one query. Use Read (a plain answer) or Poll (following), not
// both. Not thread-safe; one thread uses it at a time.
class LogReader {
 public:
  // Opens the log at `path` and finds where the answer starts: for `tail` by
  // reading backwards from the end, for `offset`/`limit` by a first pass up
  // to the end of the page, so that next_offset() is known before the first
  // line is sent. A log that does not exist (yet) reads as empty; Poll opens
  // it once it appears. InvalidArgument (logs.bad_grep) for a pattern RE2
  // refuses; IoError when the log cannot be read.
  static Result<std::unique_ptr<LogReader>> Open(const std::string& path, const LogQuery& query);
  ~LogReader();

  // With `offset` or `limit`: where the next page starts — one past the last
  // line this answer looked at, or the number of lines the log had (at least
  // `offset`) when the answer reached its end. nullopt otherwise.
  std::optional<int64_t> next_offset() const { return next_offset_; }

  // The answer as the log stood when Open ran, as text ("line\n" each) in
  // chunks of whole lines of about kLogChunkBytes. Stops early (OK) when
  // `sink` returns false.
  Status Read(const std::function<bool(std::string_view)>& sink);

  // Following: the lines of the answer that the log holds now beyond those
  // earlier calls gave, one call of `on_line` per line (its text without the
  // newline, after its time with `timestamps`). Returns false when `on_line`
  // stopped it (then do not call again), true when it reached the end of what
  // is there.
  Result<bool> Poll(const std::function<bool(std::string_view)>& on_line);

 private:
  friend Result<LogStats> CountLogLines(const std::string& path);
  class Renderer;  // bytes in, lines out (log_reader.cc)

  LogReader();
  Status Plan();
  Status PlanPage();
  Status PlanTail();
  Status EnsureOpen();
  // Renders from the cursor up to byte `until`; false when `deliver` stopped it.
  Result<bool> Advance(uint64_t until, const std::function<bool(std::string_view)>& deliver);

  // Constant after Open.
  std::string path_;
  LogQuery query_;
  std::unique_ptr<re2::RE2> re_;  // null without grep
  uint64_t end_ = 0;              // the log's size when opened: where Read stops

  // The plan: where rendering starts and which of its lines are not shown.
  std::optional<int64_t> next_offset_;
  int64_t skip_lines_ = 0;    // lines rendered from the start that are not part of the answer
  int64_t skip_matches_ = 0;  // then, of the matching lines, those not shown
  int64_t shown_ = 0;
  bool done_ = false;

  // The cursor.
  os::RandomAccessFile file_;
  std::unique_ptr<Renderer> renderer_;
  std::string line_;  // the line being handed out
};

}  // namespace lathe::run
