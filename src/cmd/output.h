// Small helpers for human output: tables, ages, JSON printing.
#pragma once

#include <string>
#include <vector>

#include "lathe/common/json.h"

namespace lathe::cmd {

// Prints rows as columns separated by two spaces; the first row is the header.
void PrintTable(const std::vector<std::vector<std::string>>& rows);
void PrintJson(const Json& j);
// "3s", "5m", "2h", "4d" since `ms` (epoch milliseconds).
std::string Age(int64_t ms);
bool IsTerminal();  // stdout is a TTY

}  // namespace lathe::cmd
