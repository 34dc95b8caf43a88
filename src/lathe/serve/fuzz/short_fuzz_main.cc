// A short, deterministic fuzz run of a libFuzzer target, built with any
// compiler (g++ with ASan and UBSan in `make test`): every file of the corpus
// directories, then a fixed number of mutants of them. The count, not a
// clock, bounds the run, so a failure reproduces with the same arguments.
//   serve_fuzz_infer_short [-runs=N] [-seed=S] [-dict=FILE] DIR|FILE...
// -dict adds the tokens of a libFuzzer dictionary (one "token" a line, with
// \\, \" and \xNN escapes; # comments) to the built-in JSON ones.
// On a crash or a sanitizer report the input is written to ./crash-<run> (in
// the ctest working directory), which the libFuzzer build replays as is.
//
// Why by hand: libFuzzer's engine needs clang's coverage instrumentation, and
// the fuzzers Debian ships (AFL++, honggfuzz, radamsa) are separate programs
// with their own compiler wrappers or one process per input. This is a
// blind mutator of ~100 lines: bit flips, byte insert/delete, truncation,
// splicing two inputs, and JSON tokens written over or between bytes.
#include <fcntl.h>
#include <sanitizer/common_interface_defs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

constexpr size_t kMaxInputBytes = 4096;  // as libFuzzer's default -max_len
constexpr size_t kPoolMax = 256;         // seeds plus recent mutants to mutate further
constexpr uint64_t kDefaultRuns = 200000;
constexpr uint64_t kDefaultSeed = 1;

// Tokens that sit on the parsers' edges: quotes and escapes, number forms
// (-0, overflow, 64-bit limits, leading zeros), and structure.
constexpr std::string_view kTokens[] = {
    "\"",
    "\\",
    "\\u00e9",
    "\\u0000",
    "-0",
    "1e999",
    "-1e999",
    "1E-400",
    "0.1",
    "01",
    "1.",
    "-",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "-9223372036854775809",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    " ",
    "null",
    "true",
    "NaN",
    "\"NaN\"",
    "\"id\":\"a\",",
    "\"parameters\":{},",
    "\"data\":[1],",
    "\"shape\":[1],",
    "[1,2]",
    "\xc3\xa9",
    "\xff",
    "\"FP32\"",
    "\"INT8\"",
    "\"UINT64\"",
    "\"BYTES\"",
    "\"FP16\"",
};

// kTokens, then the -dict file's.
std::vector<std::string> g_tokens(std::begin(kTokens), std::end(kTokens));

using Input = std::string;
using Rng = std::mt19937_64;  // fixed algorithm: the same stream on every platform

size_t Below(Rng& rng, size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); }

void Mutate(Input& in, const std::vector<Input>& pool, Rng& rng) {
  size_t at = Below(rng, in.size() + 1);
  switch (Below(rng, 7)) {
    case 0:  // flip one bit
      if (!in.empty()) in[Below(rng, in.size())] ^= static_cast<char>(1u << Below(rng, 8));
      break;
    case 1:  // insert a random byte
      in.insert(in.begin() + static_cast<std::ptrdiff_t>(at), static_cast<char>(rng()));
      break;
    case 2:  // delete a run of 1-8 bytes
      in.erase(std::min(at, in.size()), 1 + Below(rng, 8));
      break;
    case 3:  // truncate
      in.resize(at);
      break;
    case 4: {  // splice: our head, another input's tail
      const Input& other = pool[Below(rng, pool.size())];
      in = in.substr(0, at) + other.substr(Below(rng, other.size() + 1));
      break;
    }
    case 5:  // insert a token
      in.insert(at, g_tokens[Below(rng, g_tokens.size())]);
      break;
    default: {  // write a token over a number, a string or a few bytes
      const std::string& tok = g_tokens[Below(rng, g_tokens.size())];
      size_t end = at;
      while (end < in.size() && (std::isalnum(static_cast<unsigned char>(in[end])) ||
                                 in[end] == '.' || in[end] == '-' || in[end] == '+')) {
        ++end;
      }
      in.replace(std::min(at, in.size()), std::max<size_t>(end - at, 1), tok);
      break;
    }
  }
  // Bytes 0-2 choose the target's mode: keep them mostly as the seed had them,
  // so most mutants reach the JSON parsers rather than the length checks.
  if (in.size() > kMaxInputBytes) in.resize(kMaxInputBytes);
}

// The input being run, for the crash handlers (set before each run).
const Input* g_current = nullptr;
char g_crash_path[64];

// Async-signal-safe: open and write only.
void SaveCurrent() {
  if (g_current == nullptr) return;
  int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  ssize_t unused = ::write(fd, g_current->data(), g_current->size());
  (void)unused;
  ::close(fd);
  static constexpr char kMsg[] = "short fuzz: failing input written to ";
  unused = ::write(2, kMsg, sizeof(kMsg) - 1);
  unused = ::write(2, g_crash_path, std::strlen(g_crash_path));
  unused = ::write(2, "\n", 1);
}

void OnSignal(int sig) {
  SaveCurrent();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void Run(const Input& in, uint64_t run) {
  std::snprintf(g_crash_path, sizeof(g_crash_path), "crash-%llu",
                static_cast<unsigned long long>(run));
  g_current = &in;
  // An allocation of exactly the input's size, as libFuzzer passes it: ASan
  // then sees a read one byte past the end (a std::string has slack there).
  auto copy = std::make_unique<uint8_t[]>(in.size());
  std::memcpy(copy.get(), in.data(), in.size());
  LLVMFuzzerTestOneInput(copy.get(), in.size());
  g_current = nullptr;
}

// The tokens of a libFuzzer dictionary: `"..."` or `name="..."` a line.
bool LoadDict(const char* path) {
  std::ifstream f(path);
  if (!f) return false;
  std::string line;
  while (std::getline(f, line)) {
    size_t open = line.find('"'), close = line.rfind('"');
    if (line.empty() || line[0] == '#' || open == std::string::npos || close <= open) continue;
    std::string tok;
    for (size_t i = open + 1; i < close; ++i) {
      if (line[i] != '\\' || i + 1 >= close) {
        tok += line[i];
      } else if (line[i + 1] == 'x' && i + 3 < close) {
        tok += static_cast<char>(std::strtoul(line.substr(i + 2, 2).c_str(), nullptr, 16));
        i += 3;
      } else {
        tok += line[++i];
      }
    }
    if (!tok.empty()) g_tokens.push_back(tok);
  }
  return true;
}

bool ParseFlag(const char* arg, const char* name, uint64_t& out) {
  size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0) return false;
  out = std::strtoull(arg + n, nullptr, 10);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t runs = kDefaultRuns, seed = kDefaultSeed;
  __sanitizer_set_death_callback(SaveCurrent);  // ASan and UBSan reports
  // __builtin_trap and abort(); ASan reports SIGSEGV, SIGBUS and SIGFPE itself.
  for (int sig : {SIGILL, SIGABRT}) std::signal(sig, OnSignal);
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    if (ParseFlag(argv[i], "-runs=", runs) || ParseFlag(argv[i], "-seed=", seed)) continue;
    if (std::strncmp(argv[i], "-dict=", 6) == 0) {
      if (!LoadDict(argv[i] + 6)) {
        std::fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[i] + 6);
        return 2;
      }
      continue;
    }
    if (!std::filesystem::is_directory(argv[i])) {
      files.push_back(argv[i]);  // one input, e.g. a crash-<run> to replay with -runs=0
      continue;
    }
    for (const auto& e : std::filesystem::directory_iterator(argv[i])) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());  // directory order varies; the run must not
  std::vector<Input> pool;
  for (const auto& f : files) {
    std::ifstream s(f, std::ios::binary);
    pool.emplace_back(std::istreambuf_iterator<char>(s), std::istreambuf_iterator<char>());
  }
  if (pool.empty()) {
    std::fprintf(stderr,
                 "usage: %s [-runs=N] [-seed=S] [-dict=FILE] DIR|FILE...  (no input found)\n",
                 argv[0]);
    return 2;
  }
  const size_t seeds = pool.size();
  for (size_t i = 0; i < seeds; ++i) Run(pool[i], i);

  Rng rng(seed);
  for (uint64_t r = 0; r < runs; ++r) {
    // Half the mutants start from a seed, half from an earlier mutant, so
    // edits pile up; 1-4 edits each.
    const Input& base = (pool.size() == seeds || (rng() & 1))
                            ? pool[Below(rng, seeds)]
                            : pool[seeds + Below(rng, pool.size() - seeds)];
    Input in = base;
    for (size_t k = 1 + Below(rng, 4); k > 0; --k) Mutate(in, pool, rng);
    if (in.size() >= 3 && Below(rng, 8) != 0)
      std::memcpy(in.data(), base.data(), std::min<size_t>(3, base.size()));
    Run(in, seeds + r);
    if (pool.size() < kPoolMax) {
      pool.push_back(std::move(in));
    } else {
      pool[seeds + Below(rng, kPoolMax - seeds)] = std::move(in);
    }
  }
  std::printf("%zu corpus inputs and %llu mutants (seed %llu): no failure\n", seeds,
              static_cast<unsigned long long>(runs), static_cast<unsigned long long>(seed));
  return 0;
}
