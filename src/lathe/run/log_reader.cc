#include "lathe/run/log_reader.h"

#include "lathe/run/log_format.h"

#include <re2/re2.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace lathe::run {
namespace {

// A record's header ("<time> <stream> <F|P> ") must lie within its first
// kMaxHeaderBytes; both directions of reading look at no more than that.
constexpr size_t kMaxHeaderBytes = 128;
// The tail of a grep is searched in windows of at least this many lines.
constexpr int64_t kMinGrepWindowLines = 1024;
constexpr size_t kMaxShownValueBytes = 40;  // of a bad parameter, in its error

struct RecordHeader {
  bool err = false;      // stderr; any other stream name counts as stdout (as LogRenderer does)
  bool partial = false;  // P
  std::string_view timestamp;
  size_t content_at = 0;  // where the text starts in the record
};

// `prefix` is the whole record when `whole`, else its first kMaxHeaderBytes.
// Accepts what ParseLogRecord accepts (log_format.cc).
std::optional<RecordHeader> ParseHeader(std::string_view prefix, bool whole) {
  size_t a = prefix.find(' ');
  if (a == std::string_view::npos) return std::nullopt;
  size_t b = prefix.find(' ', a + 1);
  if (b == std::string_view::npos || b + (whole ? 2 : 3) > prefix.size()) return std::nullopt;
  char tag = prefix[b + 1];
  if (tag != 'F' && tag != 'P') return std::nullopt;
  RecordHeader h;
  h.err = prefix.substr(a + 1, b - a - 1) == "stderr";
  h.partial = tag == 'P';
  h.timestamp = prefix.substr(0, a);
  h.content_at = std::min(b + 3, prefix.size());
  return h;
}

std::string Shown(std::string_view v) {
  if (v.size() <= kMaxShownValueBytes) return std::string(v);
  return std::string(v.substr(0, kMaxShownValueBytes)) + "…";
}

Result<std::optional<int64_t>> NumberParam(
    const std::function<std::optional<std::string>(std::string_view)>& param, std::string_view name,
    int64_t max) {
  auto v = param(name);
  if (!v) return std::optional<int64_t>();
  int64_t n = -1;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (v->empty() || (*v)[0] == '-' || (*v)[0] == '+' || ec != std::errc() ||
      end != v->data() + v->size() || n < 0 || n > max) {
    return Status::Msg(
        Code::kInvalidArgument, "logs.bad_number",
        {{"param", std::string(name)}, {"value", Shown(*v)}, {"max", std::to_string(max)}});
  }
  return std::optional<int64_t>(n);
}

Status CompileCheck(const std::string& pattern, std::unique_ptr<RE2>* out) {
  RE2::Options o;
  o.set_log_errors(false);
  auto re = std::make_unique<RE2>(pattern, o);
  if (!re->ok()) {
    return Status::Msg(Code::kInvalidArgument, "logs.bad_grep",
                       {{"pattern", Shown(pattern)}, {"detail", re->error()}});
  }
  if (out) *out = std::move(re);
  return Status::OK();
}

Status ConflictStatus(std::string_view a, std::string_view b) {
  return Status::Msg(Code::kInvalidArgument, "logs.conflict",
                     {{"a", std::string(a)}, {"b", std::string(b)}});
}

// Where the last `n` lines begin, found by reading backwards in blocks.
// Rendering from `start` gives `skip_lines` lines that are not among them
// (lines of the other stream, or lines whose first pieces lie before `start`),
// then the last `found` lines (`found` < n only when the log has fewer).
struct TailStart {
  uint64_t start = 0;
  int64_t skip_lines = 0;
  int64_t found = 0;
  bool whole = false;  // the scan reached the start of the log
};

class TailScanner {
 public:
  TailScanner(const os::RandomAccessFile& f, uint64_t end, int64_t n)
      : f_(f), end_(end), n_(n), buf_start_(end), buf_end_(end) {}

  Result<TailStart> Scan() {
    std::vector<char> buf(kLogBlockBytes);
    buf_ = buf.data();
    uint64_t cursor = end_;       // bytes from here on have been searched for newlines
    std::optional<uint64_t> eol;  // the newline ending the record being looked for
    while (true) {
      if (cursor == buf_start_) {  // read the block before the buffer
        if (cursor == 0) break;
        uint64_t from = cursor > kLogBlockBytes ? cursor - kLogBlockBytes : 0;
        ASSIGN_OR_RETURN(size_t got, f_.ReadAt(from, buf.data(), cursor - from));
        if (got != cursor - from) return Status::IoError("the log shrank while it was read");
        buf_start_ = from;
        buf_end_ = cursor;
        if (eol && Done(from)) return result_;
      }
      const void* q = memrchr(buf_, '\n', cursor - buf_start_);
      if (!q) {
        cursor = buf_start_;
        continue;
      }
      uint64_t nl = buf_start_ + static_cast<uint64_t>(static_cast<const char*>(q) - buf_);
      if (!eol) {
        result_.start = nl + 1;  // an unfinished record after it is left to a follower
      } else {
        ASSIGN_OR_RETURN(bool done, Line(nl + 1, *eol));
        if (done) return result_;
      }
      eol = nl;
      cursor = nl;
    }
    if (eol) {
      ASSIGN_OR_RETURN(bool done, Line(0, *eol));
      if (done) return result_;
    }
    result_.whole = true;
    return result_;
  }

 private:
  enum class Side { kUnseen, kIn, kOut };
  struct Stream {
    Side side = Side::kUnseen;
    uint64_t first = 0;  // the earliest of its records seen
  };

  // Looks at the record [s, e) (e is its newline); true when the scan is done.
  Result<bool> Line(uint64_t s, uint64_t e) {
    size_t len = static_cast<size_t>(std::min<uint64_t>(e - s, kMaxHeaderBytes));
    std::string_view prefix;
    char small[kMaxHeaderBytes];
    if (s >= buf_start_ && s + len <= buf_end_) {
      prefix = std::string_view(buf_ + (s - buf_start_), len);
    } else {
      ASSIGN_OR_RETURN(size_t got, f_.ReadAt(s, small, len));
      prefix = std::string_view(small, got);
    }
    auto h = ParseHeader(prefix, e - s <= kMaxHeaderBytes);
    if (!h) return Done(s);
    Stream& st = h->err ? err_ : out_;
    bool include = false;
    if (!h->partial) {
      if (found_ < n_) {
        ++found_;
        include = true;
        st.side = Side::kIn;
      } else {
        ++pending_skip_;
        st.side = Side::kOut;
      }
    } else if (st.side != Side::kOut) {
      // A piece of a tail line, or of an unfinished line at the end.
      include = true;
      st.side = Side::kIn;
    }
    st.first = s;
    if (include) {
      result_.start = s;
      result_.skip_lines += pending_skip_;
      pending_skip_ = 0;
    }
    result_.found = found_;
    return Done(s);
  }

  // Done once n lines are found and no stream may still have pieces of a tail
  // line before `pos` (within kLogJoinGapBytes of its earliest record seen).
  bool Done(uint64_t pos) const {
    if (found_ < n_) return false;
    for (const Stream* st : {&out_, &err_}) {
      if (st->side == Side::kIn && st->first - pos <= kLogJoinGapBytes) return false;
    }
    return true;
  }

  const os::RandomAccessFile& f_;
  const uint64_t end_;
  const int64_t n_;
  const char* buf_ = nullptr;
  uint64_t buf_start_, buf_end_;  // the buffer holds [buf_start_, buf_end_)
  Stream out_, err_;
  int64_t found_ = 0;
  int64_t pending_skip_ = 0;  // F records not in the tail since `start` last moved
  TailStart result_;
};

}  // namespace

// Turns CRI bytes into lines as LogRenderer does, holding at most the first
// kMaxHeaderBytes of a record and kMaxLogLineBytes of each stream's line.
class LogReader::Renderer {
 public:
  // Called per line with its number, the time of its first piece, its text
  // and how many bytes of text were left out; false stops the Feed.
  using OnLine = std::function<bool(int64_t, std::string_view, std::string_view, uint64_t)>;

  Renderer(uint64_t pos, int64_t line)
      : pos_(pos), lines_(line), quiet_pos_(pos), quiet_lines_(line) {}

  // False when on_line stopped it (the renderer is then spent).
  bool Feed(std::string_view b, const OnLine& on_line) {
    size_t i = 0;
    while (i < b.size()) {
      const char* p = b.data() + i;
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', b.size() - i));
      size_t take = nl ? static_cast<size_t>(nl - p) : b.size() - i;
      if (in_ == In::kHeader) {
        size_t room = kMaxHeaderBytes - hdr_.size();
        if (nl && take <= room) {  // the whole record is here
          hdr_.append(p, take);
          i += take + 1;
          pos_ += take + 1;
          auto h = ParseHeader(hdr_, true);
          bool more = true;
          if (h) {
            Start(*h);
            Append(std::string_view(hdr_).substr(h->content_at));
            more = End(on_line);
          } else {
            Quiet();
          }
          hdr_.clear();
          if (!more) return false;
          continue;
        }
        size_t n = std::min(take, room);
        hdr_.append(p, n);
        i += n;
        pos_ += n;
        if (hdr_.size() == kMaxHeaderBytes) {
          auto h = ParseHeader(hdr_, false);
          if (h) {
            Start(*h);
            Append(std::string_view(hdr_).substr(h->content_at));
          }
          in_ = h ? In::kContent : In::kSkip;
          hdr_.clear();
        }
        continue;
      }
      if (in_ == In::kContent) Append(std::string_view(p, take));
      i += take;
      pos_ += take;
      if (!nl) continue;
      ++i;
      ++pos_;
      bool skipped = in_ == In::kSkip;
      in_ = In::kHeader;
      if (skipped) {
        Quiet();
      } else if (!End(on_line)) {
        return false;
      }
    }
    return true;
  }

  uint64_t pos() const { return pos_; }
  int64_t lines() const { return lines_; }
  // The last place before the current one where no stream had a line begun,
  // and the number of lines before it: rendering can restart there.
  uint64_t quiet_pos() const { return quiet_pos_; }
  int64_t quiet_lines() const { return quiet_lines_; }

 private:
  struct Pending {
    std::string ts;
    std::string text;
    uint64_t cut = 0;  // bytes of text beyond kMaxLogLineBytes, left out
  };
  enum class In { kHeader, kContent, kSkip };

  void Start(const RecordHeader& h) {
    cur_ = h.err ? &err_ : &out_;
    partial_ = h.partial;
    if (cur_->text.empty()) cur_->ts.assign(h.timestamp);
  }
  void Append(std::string_view s) {
    size_t keep = std::min(s.size(), kMaxLogLineBytes - cur_->text.size());
    cur_->text.append(s.data(), keep);
    cur_->cut += s.size() - keep;
  }
  bool End(const OnLine& on_line) {
    bool more = true;
    if (!partial_) {
      Pending& p = *cur_;
      more = on_line(lines_, p.ts, p.text, p.cut);
      ++lines_;
      if (p.text.capacity() > kLogBlockBytes) std::string().swap(p.text);
      p.text.clear();
      p.cut = 0;
    }
    Quiet();
    return more;
  }
  void Quiet() {
    if (out_.text.empty() && err_.text.empty()) {
      quiet_pos_ = pos_;
      quiet_lines_ = lines_;
    }
  }

  In in_ = In::kHeader;
  std::string hdr_;  // the first bytes of the record being read
  Pending out_, err_;
  Pending* cur_ = &out_;
  bool partial_ = false;
  uint64_t pos_;
  int64_t lines_;
  uint64_t quiet_pos_;
  int64_t quiet_lines_;
};

Result<LogQuery> ParseLogQuery(
    const std::function<std::optional<std::string>(std::string_view)>& param, bool follow) {
  LogQuery q;
  auto ts = param("timestamps");
  q.timestamps = ts && (*ts == "1" || *ts == "true" || *ts == "yes");
  ASSIGN_OR_RETURN(q.tail, NumberParam(param, "tail", kMaxLogLines));
  ASSIGN_OR_RETURN(q.offset, NumberParam(param, "offset", kMaxLogOffset));
  ASSIGN_OR_RETURN(q.limit, NumberParam(param, "limit", kMaxLogLines));
  auto numbers = param("numbers");
  q.numbers = numbers && (*numbers == "1" || *numbers == "true" || *numbers == "yes");
  if (q.numbers && q.tail) return Status::Msg(Code::kInvalidArgument, "logs.numbers_with_tail");
  if (q.tail && q.offset) return ConflictStatus("tail", "offset");
  if (q.tail && q.limit) return ConflictStatus("tail", "limit");
  if (follow && q.limit) return ConflictStatus("limit", "follow");
  q.grep = param("grep").value_or("");
  if (q.grep.size() > kMaxLogGrepBytes) {
    return Status::Msg(
        Code::kInvalidArgument, "logs.grep_too_long",
        {{"size", std::to_string(q.grep.size())}, {"max", std::to_string(kMaxLogGrepBytes)}});
  }
  if (!q.grep.empty()) RETURN_IF_ERROR(CompileCheck(q.grep, nullptr));
  return q;
}

Result<std::string> RenderLogEnd(const std::string& path, size_t bytes) {
  auto f = os::RandomAccessFile::Open(path);
  if (!f.ok()) return f.status().IsNotFound() ? Result<std::string>(std::string()) : f.status();
  ASSIGN_OR_RETURN(uint64_t size, f->Size());
  uint64_t from = size > bytes ? size - bytes : 0;
  std::string text(static_cast<size_t>(size - from), '\0');
  ASSIGN_OR_RETURN(size_t got, f->ReadAt(from, text.data(), text.size()));
  text.resize(got);
  std::string_view v = text;
  if (from > 0) v.remove_prefix(std::min(v.size(), v.find('\n') + 1));  // start at a record
  return RenderLog(v, false);
}

Result<LogStats> CountLogLines(const std::string& path) {
  auto f = os::RandomAccessFile::Open(path);
  if (!f.ok()) return f.status().IsNotFound() ? Result<LogStats>(LogStats{}) : f.status();
  LogStats st;
  ASSIGN_OR_RETURN(st.bytes, f->Size());
  LogReader::Renderer r(0, 0);
  std::vector<char> buf(kLogBlockBytes);
  auto on_line = [](int64_t, std::string_view, std::string_view, uint64_t) { return true; };
  for (uint64_t pos = 0; pos < st.bytes;) {
    ASSIGN_OR_RETURN(size_t got,
                     f->ReadAt(pos, buf.data(), std::min<uint64_t>(buf.size(), st.bytes - pos)));
    if (got == 0) break;
    pos += got;
    r.Feed(std::string_view(buf.data(), got), on_line);
  }
  st.lines = r.lines();
  return st;
}

LogReader::LogReader() = default;
LogReader::~LogReader() = default;

Result<std::unique_ptr<LogReader>> LogReader::Open(const std::string& path, const LogQuery& query) {
  std::unique_ptr<LogReader> r(new LogReader());
  r->path_ = path;
  r->query_ = query;
  if (!query.grep.empty()) RETURN_IF_ERROR(CompileCheck(query.grep, &r->re_));
  RETURN_IF_ERROR(r->EnsureOpen());
  if (r->file_.valid()) {
    ASSIGN_OR_RETURN(r->end_, r->file_.Size());
  }
  RETURN_IF_ERROR(r->Plan());
  return r;
}

Status LogReader::EnsureOpen() {
  if (file_.valid()) return Status::OK();
  auto f = os::RandomAccessFile::Open(path_);
  if (f.ok()) {
    file_ = std::move(*f);
    return Status::OK();
  }
  return f.status().IsNotFound() ? Status::OK() : f.status();
}

Status LogReader::Plan() {
  renderer_ = std::make_unique<Renderer>(0, 0);
  if (query_.tail) return PlanTail();
  if (query_.offset || query_.limit) return PlanPage();
  return Status::OK();
}

// A first pass finds the page: the line `offset` (and a place before it to
// restart from), then `limit` matching lines. The answer renders that again.
Status LogReader::PlanPage() {
  const int64_t first = query_.offset.value_or(0);
  skip_lines_ = first;
  if (query_.limit && *query_.limit == 0) {
    next_offset_ = first;
    done_ = true;
    return Status::OK();
  }
  if (!file_.valid()) {
    next_offset_ = first;
    return Status::OK();
  }
  Renderer scout(0, 0);
  std::optional<std::pair<uint64_t, int64_t>> restart;
  int64_t matches = 0;
  std::optional<int64_t> next;
  std::vector<char> buf(kLogBlockBytes);
  auto on_line = [&](int64_t number, std::string_view, std::string_view text, uint64_t) {
    if (number < first) return true;
    if (!restart) restart = {scout.quiet_pos(), scout.quiet_lines()};
    if (re_ && !RE2::PartialMatch(text, *re_)) return true;
    if (query_.limit && ++matches == *query_.limit) {
      next = number + 1;
      return false;
    }
    return true;
  };
  for (uint64_t pos = 0; pos < end_ && !next;) {
    ASSIGN_OR_RETURN(size_t got,
                     file_.ReadAt(pos, buf.data(), std::min<uint64_t>(buf.size(), end_ - pos)));
    if (got == 0) break;
    pos += got;
    if (!scout.Feed(std::string_view(buf.data(), got), on_line)) break;
  }
  next_offset_ = next ? *next : std::max(first, scout.lines());
  // With fewer than `offset` lines, rendering restarts where the first pass
  // stopped (a follower then waits there for line `offset`).
  if (!restart) restart = {scout.quiet_pos(), scout.quiet_lines()};
  renderer_ = std::make_unique<Renderer>(restart->first, restart->second);
  skip_lines_ = first - restart->second;
  return Status::OK();
}

// The last N lines; with grep, the last N matching ones, searched in windows
// of lines from the end that double until they hold N matches.
Status LogReader::PlanTail() {
  const int64_t n = *query_.tail;
  if (!file_.valid()) return Status::OK();
  if (!re_) {
    ASSIGN_OR_RETURN(TailStart t, TailScanner(file_, end_, n).Scan());
    renderer_ = std::make_unique<Renderer>(t.start, 0);
    skip_lines_ = t.skip_lines;
    return Status::OK();
  }
  std::vector<char> buf(kLogBlockBytes);
  constexpr int64_t kMaxWindowLines = kMaxLogLines * 64;
  for (int64_t window = std::max(n, kMinGrepWindowLines);;
       window = std::min(window * 2, kMaxWindowLines)) {
    ASSIGN_OR_RETURN(TailStart t, TailScanner(file_, end_, window).Scan());
    Renderer count(t.start, 0);
    int64_t skip = t.skip_lines, matches = 0;
    auto on_line = [&](int64_t, std::string_view, std::string_view text, uint64_t) {
      if (skip > 0) {
        --skip;
      } else if (RE2::PartialMatch(text, *re_)) {
        ++matches;
      }
      return true;
    };
    for (uint64_t pos = t.start; pos < end_;) {
      ASSIGN_OR_RETURN(size_t got,
                       file_.ReadAt(pos, buf.data(), std::min<uint64_t>(buf.size(), end_ - pos)));
      if (got == 0) break;
      pos += got;
      count.Feed(std::string_view(buf.data(), got), on_line);
    }
    if (matches >= n || t.whole || t.found < window || window == kMaxWindowLines) {
      renderer_ = std::make_unique<Renderer>(t.start, 0);
      skip_lines_ = t.skip_lines;
      skip_matches_ = std::max<int64_t>(0, matches - n);
      return Status::OK();
    }
  }
}

Result<bool> LogReader::Advance(uint64_t until,
                                const std::function<bool(std::string_view)>& deliver) {
  if (done_) return false;
  RETURN_IF_ERROR(EnsureOpen());
  if (!file_.valid()) return true;
  std::vector<char> buf(kLogBlockBytes);
  auto on_line = [&](int64_t number, std::string_view ts, std::string_view text, uint64_t cut) {
    if (skip_lines_ > 0) {
      --skip_lines_;
      return true;
    }
    if (re_ && !RE2::PartialMatch(text, *re_)) return true;
    if (skip_matches_ > 0) {
      --skip_matches_;
      return true;
    }
    line_.clear();
    if (query_.numbers) {
      line_ += std::to_string(number);
      line_ += '\t';
    }
    if (query_.timestamps) {
      line_.append(ts);
      line_ += ' ';
    }
    line_.append(text);
    if (cut > 0) line_ += fmt::format("…(+{} B)", cut);
    ++shown_;
    bool more = deliver(line_);
    if (query_.limit && shown_ >= *query_.limit) done_ = true;
    return more && !done_;
  };
  while (renderer_->pos() < until) {
    uint64_t pos = renderer_->pos();
    ASSIGN_OR_RETURN(size_t got,
                     file_.ReadAt(pos, buf.data(), std::min<uint64_t>(buf.size(), until - pos)));
    if (got == 0) break;
    if (!renderer_->Feed(std::string_view(buf.data(), got), on_line)) {
      done_ = true;
      return false;
    }
  }
  return true;
}

Status LogReader::Read(const std::function<bool(std::string_view)>& sink) {
  std::string out;
  bool stopped = false;
  auto r = Advance(end_, [&](std::string_view line) {
    out.append(line);
    out += '\n';
    if (out.size() < kLogChunkBytes) return true;
    bool more = sink(out);
    out.clear();
    stopped = !more;
    return more;
  });
  RETURN_IF_ERROR(r.status());
  if (!stopped && !out.empty()) sink(out);
  return Status::OK();
}

Result<bool> LogReader::Poll(const std::function<bool(std::string_view)>& on_line) {
  if (done_) return false;
  RETURN_IF_ERROR(EnsureOpen());
  if (!file_.valid()) return true;
  ASSIGN_OR_RETURN(uint64_t size, file_.Size());
  return Advance(size, on_line);
}

}  // namespace lathe::run
