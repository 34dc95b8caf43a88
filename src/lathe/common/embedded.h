// Files from data/ compiled into the binary (see cmake/embed.cmake).
#pragma once

#include <string_view>
#include <vector>

namespace lathe {

struct EmbeddedFile {
  std::string_view name;  // base name, e.g. "messages.yaml"
  std::string_view text;
};

const std::vector<EmbeddedFile>& EmbeddedFiles();

// The text of data/<name>, or an empty view when there is none.
std::string_view FindEmbedded(std::string_view name);

}  // namespace lathe
