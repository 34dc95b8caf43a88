// The model registry's rules that need no daemon (registry.h has the
// registry itself): names and references, which file of a snapshot a version
// serves, and the `lathe serve --repository` config an export writes.
//
//   NAME        a model: 1-64 of [A-Za-z0-9._-], starting with a letter or digit
//   NAME/N      its version N (1, 2, …)
//   NAME@ALIAS  the version ALIAS points at; NAME@latest is the newest
//   RUN[@latest|@STEP]  a run's newest complete checkpoint, or the one of step STEP
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lathe/common/status.h"
#include "lathe/snap/manifest.h"
#include "lathe/state/model_store.h"

namespace lathe::deploy {

// The alias every model has: its newest version. It cannot be set.
inline constexpr std::string_view kLatestAlias = "latest";
inline constexpr size_t kMaxModelNoteBytes = 2000;

// What `lathe model create` asks for (POST /api/v1/models). Exactly one
// source: from_run, from_snapshot or from_dir.
struct ModelVersionRequest {
  std::string name;
  std::string from_run;       // RUN, RUN@latest, RUN@STEP
  std::string from_snapshot;  // an id or unique prefix
  std::string from_dir;       // absolute; snapshotted with the caller's identity
  std::string file;           // a glob over the snapshot's files ("" = choose)
  std::string handler;        // process: the handler, relative to the snapshot's root
  std::string backend;        // "" (from the file) | "torchscript" | "process"
  std::string note;
  bool is_public = false;  // makes the model public (it stays so)
};

// Where a new version's bytes come from: a snapshot of the store, with what
// is known of how it was made.
struct ModelSource {
  std::string id;  // the snapshot
  snap::Manifest manifest;
  std::string checkpoint;  // the source's checkpoint file ("" when none)
  Json lineage = Json::object();
};

struct ModelRef {
  std::string name;
  std::optional<int64_t> version;  // NAME/N
  std::string alias;               // NAME@ALIAS ("" otherwise)
};

// InvalidArgument (model.bad_name / model.bad_alias / model.bad_ref) naming
// what was given and what is allowed.
Status CheckModelName(const std::string& name);
Status CheckAliasName(const std::string& alias);
Result<ModelRef> ParseModelRef(std::string_view ref);
// A version number or step: digits without a leading zero, 1 or more.
std::optional<int64_t> PositiveNumber(std::string_view s);

struct RunSource {
  std::string run;
  std::optional<int64_t> step;  // nullopt: the newest complete checkpoint
};
Result<RunSource> ParseRunSource(std::string_view s);  // model.bad_run_source

// What a version serves, chosen from the snapshot's files.
struct ServedFiles {
  std::string backend;  // "torchscript" | "process"
  std::string file;     // the primary file (relative; "" when only a handler)
  std::string handler;  // process: the handler (relative)
};

// Picks the served files of `m`:
//  1. `handler` (when given) must be a file of the snapshot; the backend is
//     then `process` (`torchscript` with a handler is refused);
//  2. the primary file is the one file `pattern` matches (a glob over the
//     path, or over the base name when it has no '/'), preferring
//     `checkpoint` (the source's checkpoint) among several; without a
//     pattern, `checkpoint` when it is a file, else the handler, else the
//     snapshot's only file;
//  3. the backend, when not given, follows the primary file's extension
//     (.pt .pth .ts .torchscript .jit: torchscript; .py: process, the file
//     being the handler);
//  4. what `lathe serve` loads by name (the torchscript file, the handler)
//     must lie at the snapshot's top level (model.file_not_top_level).
// InvalidArgument naming the field (file, handler, backend) otherwise.
Result<ServedFiles> ChooseServedFiles(const snap::Manifest& m, const std::string& pattern,
                                      const std::string& handler, const std::string& backend,
                                      const std::string& checkpoint);

// <repo>/<model>/config.yaml for a `lathe serve --repository` export of `v`.
std::string ExportConfigYaml(const state::ModelVersionRecord& v);

}  // namespace lathe::deploy
