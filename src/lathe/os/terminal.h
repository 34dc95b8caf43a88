// The controlling terminal, for what a person types.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace lathe::os {

// True when standard input, output or error is a terminal (isatty(3)).
bool StdinIsTerminal();
bool StdoutIsTerminal();
bool StderrIsTerminal();

// The columns of the terminal on standard output; nullopt when it is not one
// (or does not say).
std::optional<int> StdoutColumns();

// Reads one line from standard input without the newline, at most
// `max_bytes` (the rest of a longer line is read and dropped, and the result
// is then longer than max_bytes by one byte, for the caller to refuse).
// On a terminal, `prompt` goes to stderr first and what is typed is not
// echoed (a password or token). nullopt at end of input before any byte.
std::optional<std::string> ReadSecretLine(std::string_view prompt, size_t max_bytes);

// Reads standard input to its end, at most `max_bytes` + 1 bytes (one more
// than allowed, for the caller to refuse; the rest is not read).
std::string ReadStdinUpTo(size_t max_bytes);

}  // namespace lathe::os
