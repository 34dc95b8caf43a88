// Matches log text against the knowledge base and ranks the entries it finds.
//
// Every log line (split at '\n' and '\r', since progress bars rewrite a line
// with '\r') is matched against all patterns at once with an RE2::Set: linear
// time, no backtracking, so a 100 KB tqdm line costs no more than its length.
//
// Ranking: an entry is a candidate only when one of its signatures matched.
// Its score is 10 per distinct signature matched plus 1 per distinct hint
// matched; ties go to the higher `priority`, then to the entry whose first
// signature match came earlier in the log, then to the smaller id. So a log
// is explained first by the most specific evidence it contains.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <re2/re2.h>
#include <re2/set.h>

#include "lathe/common/i18n.h"
#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/doctor/kb.h"

namespace lathe::doctor {

// Display cap for a matched line: longer lines are cut around the match.
inline constexpr size_t kMaxShownLineBytes = 240;

struct KbMatch {
  const KbEntry* entry = nullptr;  // points into the KnowledgeBase
  int score = 0;
  size_t line_no = 0;                   // 1-based line of the first signature match
  std::string line;                     // that line, cut to kMaxShownLineBytes around the match
  std::vector<std::string> signatures;  // the distinct signatures that matched
  MsgArgs values;  // what the entry's `extract` read from the log (fills its detail)
};

// The entry's detail line filled with the match's values in `lang`; "" when
// the entry has none or nothing was read.
std::string MatchDetail(const KbMatch& m, Lang lang);

// torchrun's ChildFailedError report: from its "Root Cause (first observed
// failure)" block, the first failing rank (rank, local_rank, host,
// exitcode) and its error — the last line of the block's traceback, else
// the last "[rankN]: …Error: …" line the rank printed, else "-". Empty when
// the log has no such block.
MsgArgs ExtractTorchelasticRootCause(std::string_view log_text);

class Explainer {
 public:
  // Compiles every pattern of `kb`, which must outlive the Explainer.
  // InvalidArgument names an entry whose pattern does not compile.
  static Result<std::unique_ptr<Explainer>> Create(const KnowledgeBase& kb);

  // The explainer over KnowledgeBase::Default(), built once.
  static const Explainer& Default();

  // The candidates for `log_text`, best first, at most `max_matches`.
  // Thread-safe (const, and RE2 is thread-safe).
  std::vector<KbMatch> Explain(std::string_view log_text, size_t max_matches = 5) const;

  Explainer(const Explainer&) = delete;
  Explainer& operator=(const Explainer&) = delete;

 private:
  struct Pattern {
    size_t entry;    // index into kb_.entries()
    bool signature;  // false: a hint
    std::unique_ptr<RE2> re;
  };
  struct Tally;  // per-entry evidence while scanning

  Explainer(const KnowledgeBase& kb, RE2::Set set, std::vector<Pattern> patterns)
      : kb_(kb), set_(std::move(set)), patterns_(std::move(patterns)) {}
  void MatchLine(std::string_view line, std::vector<int>& hits) const;
  std::vector<KbMatch> Rank(std::vector<Tally>& tallies, size_t max_matches) const;

  const KnowledgeBase& kb_;
  RE2::Set set_;
  std::vector<Pattern> patterns_;  // index = the pattern's index in set_
};

// What the daemon attaches to a failed run: the best `max_matches` entries
// for the run's log tail, as
//   [{"id", "score", "line_no", "line" (valid UTF-8), "title": {"en","zh"}, "scenario": {…},
//     "cause": {…}, "verify", "fix": {…}, "detail": {"en","zh"} | null, "values": {…}}]
// ([] when nothing matched). Uses the embedded knowledge base; thread-safe.
Json DiagnoseLog(std::string_view log_text, size_t max_matches = 3);

}  // namespace lathe::doctor
