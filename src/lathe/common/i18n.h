// Bilingual text (简体中文 / English) and the message catalog.
//
// Every message a person reads has an id and both zh-CN and en text. They
// live as data in data/*.yaml, all in one format shared by the message
// catalog, the doctor's knowledge base and the glossary:
//
//   - id: run.not_found            # every entry has a unique id
//     text:                        # a mapping with en+zh is bilingual text;
//       en: "run {run} not found"  # both languages are required
//       zh: "找不到运行 {run}"
//     severity: warn               # plain scalars and lists are allowed too
//
// Placeholders are {name}; they are filled from MsgArgs.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"

namespace lathe {

// kPseudo is the pseudo-locale (LATHE_LANG=pseudo or --lang pseudo): every
// catalog text is its English text between ⟦ and ⟧, so a test can tell a
// text that went through the catalog from one that did not.
enum class Lang { kEn, kZh, kPseudo };

// Chooses the language: `flag` (from --lang) if given, else LATHE_LANG, else
// LC_ALL, LC_MESSAGES, LANG; anything starting with "zh" means Chinese,
// "pseudo" the pseudo-locale. `getenv` is injectable for tests.
using GetenvFn = const char* (*)(const char*);
Lang DetectLang(std::optional<std::string_view> flag, GetenvFn getenv_fn);
Lang DetectLang(std::optional<std::string_view> flag = std::nullopt);
// Parses "zh", "zh-CN", "zh_CN.UTF-8", "en", "en_US", "pseudo"...; nullopt if
// none of them.
std::optional<Lang> ParseLang(std::string_view s);
std::string_view LangName(Lang lang);  // "en" | "zh" | "pseudo"

// The pseudo-locale's rendering of an English text: "⟦" + en + "⟧".
std::string PseudoText(std::string_view en);
// The text of `lang` from an English and a Chinese one (e.g. the "en" and
// "zh" fields of a JSON object the daemon sent).
std::string PickText(const std::string& en, const std::string& zh, Lang lang);

struct BiText {
  std::string en;
  std::string zh;
  std::string Get(Lang lang) const { return PickText(en, zh, lang); }
};

// One entry of a bilingual data file.
struct DataEntry {
  std::string id;
  std::map<std::string, BiText> text;                     // fields with en+zh
  std::map<std::string, std::string> plain;               // scalar fields
  std::map<std::string, std::vector<std::string>> lists;  // lists of scalars
  std::map<std::string, std::vector<BiText>> bilists;     // lists of en+zh
};

// Parses a data file. Fails (naming the file, entry id and field) on a
// bilingual field missing a language, a missing or duplicate id, or bad YAML.
Result<std::vector<DataEntry>> ParseDataFile(std::string_view yaml, std::string_view file_name);

// Replaces each {key} in `templ` by its value from `args`; unknown
// placeholders are left as they are.
std::string FillPlaceholders(std::string_view templ, const MsgArgs& args);

// The message catalog: data/messages*.yaml (one file per area, e.g.
// messages.yaml, messages_snap.yaml), embedded in the binary.
// Thread-safe after construction.
class Catalog {
 public:
  // The embedded catalog, indexed by id at first use and each entry parsed
  // the first time it is asked for: a command that prints a few texts does
  // not pay for parsing them all (yaml-cpp takes ~12 ms for the whole
  // catalog; the index, ~0.2 ms). A broken entry renders as its id with its
  // arguments: the catalog tests (FromEmbedded) catch that at build time.
  static const Catalog& Default();

  static Result<Catalog> FromYaml(std::string_view yaml, std::string_view file_name);
  // All embedded data/messages*.yaml; an id defined twice is an error.
  static Result<Catalog> FromEmbedded();

  bool Has(std::string_view id) const;
  // The text of `id` in `lang` with placeholders filled. An unknown id
  // yields the id itself followed by its arguments, so nothing is lost.
  std::string Format(std::string_view id, Lang lang, const MsgArgs& args = {}) const;
  // Every entry (a lazy catalog parses them all now).
  const std::vector<DataEntry>& entries() const;
  // The ids, in file order, without parsing anything.
  const std::vector<std::string>& ids() const { return ids_; }
  // One entry by id; null when unknown (or, lazily, when it does not parse).
  const DataEntry* Find(std::string_view id) const;

  Catalog();
  ~Catalog();
  Catalog(Catalog&&) noexcept;
  Catalog& operator=(Catalog&&) noexcept;

 private:
  static Catalog Lazy();  // the embedded files, indexed, nothing parsed

  std::vector<std::string> ids_;
  std::map<std::string, size_t, std::less<>> index_;  // id -> position in ids_
  // Eager catalogs fill entries_ at once; the lazy one keeps each entry's
  // YAML and parses it on first use (under mu_, so it stays thread-safe).
  struct LazyState;
  std::unique_ptr<LazyState> lazy_;
  mutable std::vector<DataEntry> entries_;
};

// Shorthand for Catalog::Default().Format.
std::string Tr(std::string_view id, Lang lang, const MsgArgs& args = {});

// Renders a Status for a person: its catalog message in `lang` when it has
// one, else its English message.
std::string Localize(const Status& s, Lang lang);

}  // namespace lathe
