#include "lathe/os/terminal.h"

#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>

namespace lathe::os {

bool StdinIsTerminal() { return ::isatty(STDIN_FILENO) == 1; }
bool StdoutIsTerminal() { return ::isatty(STDOUT_FILENO) == 1; }
bool StderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

std::optional<int> StdoutColumns() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0) return std::nullopt;
  return static_cast<int>(ws.ws_col);
}

std::optional<std::string> ReadSecretLine(std::string_view prompt, size_t max_bytes) {
  const bool tty = StdinIsTerminal();
  termios saved{};
  bool restore = false;
  if (tty) {
    std::fwrite(prompt.data(), 1, prompt.size(), stderr);
    std::fflush(stderr);
    if (::tcgetattr(STDIN_FILENO, &saved) == 0) {
      termios quiet = saved;
      quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
      restore = ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) == 0;
    }
  }
  std::string line;
  bool any = false;
  int c;
  while ((c = std::fgetc(stdin)) != EOF) {
    any = true;
    if (c == '\n') break;
    if (line.size() <= max_bytes) line += static_cast<char>(c);
  }
  if (restore) ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
  if (tty) std::fputc('\n', stderr);  // the newline typed was not echoed
  if (!any) return std::nullopt;
  return line;
}

std::string ReadStdinUpTo(size_t max_bytes) {
  std::string out;
  char buf[4096];
  size_t n;
  while (out.size() <= max_bytes && (n = std::fread(buf, 1, sizeof buf, stdin)) > 0) {
    out.append(buf, std::min(n, max_bytes + 1 - out.size()));
  }
  return out;
}

}  // namespace lathe::os
