// The bilingual glossary of GPU, cloud, training and serving vocabulary
// (`lathe term`): data/glossary.yaml, embedded, in the shared format of
// common/i18n.h:
//
//   - id: spot_instance
//     term:    {en: "spot instance", zh: "抢占式实例"}
//     aliases: ["preemptible instance", "竞价实例"]   # optional, any language
//     kind: concept          # concept | param (an env var, flag or option name)
//     category: cloud        # cloud | gpu | cuda | training | distributed | serving | system |
//     data | lathe context: {en, zh}      # what it means, where it shows up usage:   {en, zh} #
//     how to use the word (or the parameter) correctly related: [preemption]  # optional glossary
//     ids kb: [spot.preempted]   # optional knowledge-base ids
//
// A `param` term's English name is the parameter itself (NCCL_IB_DISABLE):
// it is never translated; term.zh is its Chinese gloss ("禁用 InfiniBand").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/i18n.h"
#include "lathe/common/status.h"

namespace lathe::doctor {

struct GlossaryEntry {
  std::string id;
  BiText term;
  std::vector<std::string> aliases;
  bool param = false;  // kind: param
  std::string category;
  BiText context;
  BiText usage;
  std::vector<std::string> related;  // glossary ids
  std::vector<std::string> kb;       // knowledge-base ids

  // The heading shown to a reader: for a param, "NCCL_IB_DISABLE（禁用 InfiniBand）"
  // in Chinese and "NCCL_IB_DISABLE" in English; otherwise term.Get(lang).
  std::string Heading(Lang lang) const;
};

class Glossary {
 public:
  // Parses and validates a glossary text: term, context and usage in both
  // languages, a known kind, and `related` ids that exist in this glossary.
  static Result<Glossary> FromYaml(std::string_view yaml, std::string_view file_name);

  // The embedded data/glossary.yaml; aborts if it is broken (a build defect
  // that glossary tests catch first).
  static const Glossary& Default();

  const std::vector<GlossaryEntry>& entries() const { return entries_; }
  const GlossaryEntry* Find(std::string_view id) const;

 private:
  std::vector<GlossaryEntry> entries_;
};

}  // namespace lathe::doctor
