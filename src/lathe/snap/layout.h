// Where things live in a store directory, and the store's config.
//
//   <store>/config.json          format, chunker parameters, pack size (fixed at creation)
//   <store>/lock                 flock: snapshots, restores, prune, fsck shared; gc, index repair
//   exclusive <store>/index.db             SQLite cache (index.h), rebuildable from the rest
//   <store>/index.db.corrupt-<ms>  a damaged index, moved aside when it was rebuilt
//   <store>/packs/<name>.pack    chunks (pack.h)
//   <store>/packs/tmp/           packs being written; removed by gc
//   <store>/snapshots/<id>.json.zst   manifests (zstd-compressed canonical JSON)
//   <store>/snapshots/<id>.pruned     a manifest prune is removing (manifest_files.h)
//   <store>/skipped/<ms>-<rand>.json  snapshots skipped for lack of space, with the reason
//   <store>/pins/<id>/<holder>    what keeps a snapshot from being removed (pins.h)
//   <store>/pins.lock             flock: pinning, and the removals that check pins
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/snap/chunker.h"

namespace lathe::snap {

inline constexpr std::string_view kStoreFormat = "lathe-store/1";

struct StoreLayout {
  std::string root;  // absolute

  std::string config() const { return root + "/config.json"; }
  std::string lock() const { return root + "/lock"; }
  std::string index() const { return root + "/index.db"; }
  std::string packs() const { return root + "/packs"; }
  std::string pack_tmp() const { return root + "/packs/tmp"; }
  std::string snapshots() const { return root + "/snapshots"; }
  std::string skipped() const { return root + "/skipped"; }
  std::string pins() const { return root + "/pins"; }
  std::string pins_lock() const { return root + "/pins.lock"; }
  std::string pin_dir(const std::string& id) const { return pins() + "/" + id; }
  std::string pack(const std::string& name) const { return packs() + "/" + name + ".pack"; }
  std::string manifest(const std::string& id) const { return snapshots() + "/" + id + ".json.zst"; }
  std::string pruned(const std::string& id) const { return snapshots() + "/" + id + ".pruned"; }
};

struct StoreConfig {
  ChunkerParams chunker;
  uint64_t pack_target_bytes = 16ull << 20;
  std::optional<uint64_t> reserve_bytes;  // unset: DefaultReserveBytes of the filesystem
  int64_t created_ms = 0;
};

std::string ConfigToJson(const StoreConfig& c);
// InvalidArgument (catalog id snap.bad_store) when it is not a store config.
Result<StoreConfig> ConfigFromJson(const std::string& text, const std::string& path);

// Names of the committed packs (without ".pack"), sorted.
Result<std::vector<std::string>> ListPackNames(const StoreLayout& l);

}  // namespace lathe::snap
