// The knowledge base: known failures of GPU training and serving, each with
// the log signatures that reveal it and the scenario → cause → verify → fix
// that explains it, in English and 简体中文.
//
// It is data (data/kb.yaml, embedded in the binary), in the shared bilingual
// format of common/i18n.h:
//
//   - id: cuda.no_kernel_image
//     title:    {en: "...", zh: "..."}
//     signatures:              # RE2 patterns, matched against single log lines;
//       - 'no kernel image is available for execution on the device'
//     hints:                   # optional weaker patterns: they only add to the
//       - 'CUDA error'         # score of an entry that a signature matched
//     priority: 5              # optional tie-breaker, higher wins (default 0)
//     scenario: {en, zh}       # what the person sees
//     cause:    {en, zh}       # why it happens
//     verify: "python3 -c ..." # the exact command that confirms the cause
//     fix:      {en, zh}       # what to do
//     terms: [compute_capability]   # optional glossary ids
//     checks: [gpu.arch]            # optional doctor check ids
//     extract: torchelastic_root_cause   # optional: a built-in reader of the log
//     detail: {en: "rank {rank} …", zh: "…"}  # with extract: one line filled
//                                            # with what it read
//
// Loading validates everything a test must catch: a missing translation, a
// duplicate id, an entry without a signature or a verify command, and a
// pattern RE2 cannot compile (the error names the entry and the pattern).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/i18n.h"
#include "lathe/common/status.h"

namespace lathe::doctor {

struct KbEntry {
  std::string id;
  BiText title;
  BiText scenario;
  BiText cause;
  BiText fix;
  std::string verify;                   // a shell command, the same in both languages
  std::vector<std::string> signatures;  // at least one
  std::vector<std::string> hints;
  int priority = 0;
  std::vector<std::string> terms;   // glossary ids
  std::vector<std::string> checks;  // doctor check ids
  // A built-in reader of the log (KnownExtractors()) whose values fill
  // `detail`; both empty, or both set.
  std::string extract;
  std::optional<BiText> detail;
};

// The readers an entry's `extract` may name: "torchelastic_root_cause"
// (the "Root Cause (first observed failure)" block of torchrun's
// ChildFailedError: rank, local_rank, host, exitcode, error).
const std::vector<std::string_view>& KnownExtractors();

class KnowledgeBase {
 public:
  // Parses and validates a kb.yaml text; `file_name` names it in errors.
  static Result<KnowledgeBase> FromYaml(std::string_view yaml, std::string_view file_name);

  // The embedded data/kb.yaml, parsed once. Aborts with the error if it is
  // broken: that is a build defect, and kb_test fails on it first.
  static const KnowledgeBase& Default();

  const std::vector<KbEntry>& entries() const { return entries_; }
  // nullptr when there is no entry `id`.
  const KbEntry* Find(std::string_view id) const;

 private:
  std::vector<KbEntry> entries_;
};

// Compiles `pattern` with the options the explainer uses; InvalidArgument
// with RE2's message when it does not compile.
Status CheckPattern(std::string_view pattern);

}  // namespace lathe::doctor
