#include "lathe/common/embedded.h"

namespace lathe {

std::string_view FindEmbedded(std::string_view name) {
  for (const auto& f : EmbeddedFiles()) {
    if (f.name == name) return f.text;
  }
  return {};
}

}  // namespace lathe
