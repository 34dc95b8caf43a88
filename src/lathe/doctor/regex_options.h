// The one set of RE2 options for log signatures, so that validation (kb.cc)
// and matching (explainer.cc) can never disagree about what compiles.
#pragma once

#include <re2/re2.h>

namespace lathe::doctor {

// UTF-8, case-sensitive unless a pattern says (?i), errors not logged to
// stderr, and a memory budget large enough for ~200 patterns in one RE2::Set.
inline RE2::Options ExplainRegexOptions() {
  RE2::Options o;
  o.set_encoding(RE2::Options::EncodingUTF8);
  o.set_log_errors(false);
  o.set_max_mem(64 << 20);
  return o;
}

}  // namespace lathe::doctor
