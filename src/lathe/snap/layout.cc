#include "lathe/snap/layout.h"

#include <nlohmann/json.hpp>

#include "lathe/os/files.h"

namespace lathe::snap {

std::string ConfigToJson(const StoreConfig& c) {
  nlohmann::json j = {{"format", kStoreFormat},
                      {"chunker",
                       {{"min_bytes", c.chunker.min_bytes},
                        {"avg_bytes", c.chunker.avg_bytes},
                        {"max_bytes", c.chunker.max_bytes}}},
                      {"pack_target_bytes", c.pack_target_bytes},
                      {"created_ms", c.created_ms}};
  if (c.reserve_bytes) j["reserve_bytes"] = *c.reserve_bytes;
  return j.dump(2) + "\n";
}

Result<StoreConfig> ConfigFromJson(const std::string& text, const std::string& path) {
  auto bad = [&](const std::string& why) {
    return Status::Msg(Code::kInvalidArgument, "snap.bad_store", {{"path", path}, {"detail", why}});
  };
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return bad("config.json is not a JSON object");
  if (j.value("format", "") != kStoreFormat)
    return bad("unknown format '" + j.value("format", "") + "'");
  StoreConfig c;
  try {  // nlohmann throws on a wrong type; it stops here
    const auto& ch = j.at("chunker");
    c.chunker = {ch.at("min_bytes").get<uint32_t>(), ch.at("avg_bytes").get<uint32_t>(),
                 ch.at("max_bytes").get<uint32_t>()};
    c.pack_target_bytes = j.at("pack_target_bytes").get<uint64_t>();
    c.created_ms = j.value("created_ms", int64_t{0});
    if (j.contains("reserve_bytes")) c.reserve_bytes = j.at("reserve_bytes").get<uint64_t>();
  } catch (const std::exception& e) {
    return bad(e.what());
  }
  if (!ValidChunkerParams(c.chunker)) return bad("invalid chunker parameters");
  return c;
}

Result<std::vector<std::string>> ListPackNames(const StoreLayout& l) {
  ASSIGN_OR_RETURN(auto names, os::ListDir(l.packs()));
  std::vector<std::string> out;
  constexpr std::string_view kExt = ".pack";
  for (auto& n : names) {
    if (n.size() > kExt.size() && n.compare(n.size() - kExt.size(), kExt.size(), kExt) == 0) {
      out.push_back(n.substr(0, n.size() - kExt.size()));
    }
  }
  return out;
}

}  // namespace lathe::snap
