#include "lathe/common/path_check.h"

#include <climits>
#include <string>

namespace lathe {
namespace {

constexpr size_t kQuotedBytes = 40;  // of an over-long name, in messages

}  // namespace

Status CheckNoNul(std::string_view value, std::string_view field) {
  if (value.find('\0') == std::string_view::npos) return Status::OK();
  return Status::Msg(Code::kInvalidArgument, "input.nul_byte", {{"field", std::string(field)}});
}

Status CheckPathName(std::string_view path, std::string_view field) {
  RETURN_IF_ERROR(CheckNoNul(path, field));
  if (path.size() >= PATH_MAX) {
    return Status::Msg(Code::kInvalidArgument, "path.too_long",
                       {{"field", std::string(field)},
                        {"length", std::to_string(path.size())},
                        {"max", std::to_string(PATH_MAX - 1)}});
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view name = path.substr(start, end - start);
    if (name.size() > NAME_MAX) {
      return Status::Msg(Code::kInvalidArgument, "path.name_too_long",
                         {{"field", std::string(field)},
                          {"name", std::string(name.substr(0, kQuotedBytes)) + "..."},
                          {"length", std::to_string(name.size())},
                          {"max", std::to_string(NAME_MAX)}});
    }
    start = end + 1;
  }
  return Status::OK();
}

}  // namespace lathe
