#include "lathe/snap/test_util/snap_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace lathe::snap::testing {
namespace fs = std::filesystem;

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/lathe-snap-test-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp");
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
  fs::remove_all(path_, ec);
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng();
    for (size_t k = 0; k < 8 && i + k < n; ++k) s[i + k] = static_cast<char>(v >> (8 * k));
  }
  return s;
}

void WriteFile(const std::string& path, const std::string& data, unsigned mode) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  f.close();
  ::chmod(path.c_str(), mode);
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::map<std::string, std::string> TreeOf(const std::string& root) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    std::string rel = fs::relative(it->path(), root).string();
    struct stat st;
    ::lstat(it->path().c_str(), &st);
    std::string mode = std::to_string(st.st_mode & 07777);
    if (it->is_symlink()) {
      out[rel] = "l:" + fs::read_symlink(it->path()).string();
    } else if (it->is_directory()) {
      out[rel] = "d:" + mode;
    } else {
      out[rel] = "f:" + mode + ":" + ReadAll(it->path().string());
    }
  }
  return out;
}

namespace {

uint32_t Crc32(const std::string& s) {
  uint32_t c = 0xFFFFFFFF;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320 & (0 - (c & 1)));
  }
  return ~c;
}

void Le(std::string* s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}

}  // namespace

std::string MakeZip(const std::vector<std::pair<std::string, std::string>>& entries, bool zip64) {
  std::string out, cd;
  for (const auto& [name, data] : entries) {
    uint64_t off = out.size();
    uint32_t crc = Crc32(data);
    out += "PK\x03\x04";
    Le(&out, 20, 2), Le(&out, 0, 2), Le(&out, 0, 2), Le(&out, 0, 2), Le(&out, 0, 2);
    Le(&out, crc, 4), Le(&out, data.size(), 4), Le(&out, data.size(), 4);
    Le(&out, name.size(), 2), Le(&out, 0, 2);
    out += name + data;
    cd += "PK\x01\x02";
    Le(&cd, 20, 2), Le(&cd, 20, 2), Le(&cd, 0, 2), Le(&cd, 0, 2), Le(&cd, 0, 2), Le(&cd, 0, 2);
    Le(&cd, crc, 4), Le(&cd, data.size(), 4), Le(&cd, data.size(), 4);
    Le(&cd, name.size(), 2), Le(&cd, 0, 2), Le(&cd, 0, 2), Le(&cd, 0, 2), Le(&cd, 0, 2),
        Le(&cd, 0, 4);
    Le(&cd, off, 4);
    cd += name;
  }
  uint64_t cd_off = out.size();
  out += cd;
  if (zip64) {
    uint64_t rec = out.size();
    out += "PK\x06\x06";
    Le(&out, 44, 8), Le(&out, 45, 2), Le(&out, 45, 2), Le(&out, 0, 4), Le(&out, 0, 4);
    Le(&out, entries.size(), 8), Le(&out, entries.size(), 8), Le(&out, cd.size(), 8),
        Le(&out, cd_off, 8);
    out += "PK\x06\x07";
    Le(&out, 0, 4), Le(&out, rec, 8), Le(&out, 1, 4);
  }
  out += "PK\x05\x06";
  Le(&out, 0, 2), Le(&out, 0, 2);
  Le(&out, zip64 ? 0xFFFF : entries.size(), 2), Le(&out, zip64 ? 0xFFFF : entries.size(), 2);
  Le(&out, zip64 ? 0xFFFFFFFF : cd.size(), 4), Le(&out, zip64 ? 0xFFFFFFFF : cd_off, 4);
  Le(&out, 0, 2);
  return out;
}

std::string MakeSafetensors(const std::vector<std::pair<std::string, size_t>>& tensors,
                            uint64_t seed) {
  std::string header = "{", data;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, count] = tensors[i];
    size_t begin = data.size();
    data += RandomBytes(count * 4, seed + i);
    header += (i ? "," : "") + std::string("\"") + name + "\":{\"dtype\":\"F32\",\"shape\":[" +
              std::to_string(count) + "],\"data_offsets\":[" + std::to_string(begin) + "," +
              std::to_string(data.size()) + "]}";
  }
  header += "}";
  while ((8 + header.size()) % 8 != 0) header += ' ';
  std::string out;
  Le(&out, header.size(), 8);
  return out + header + data;
}

std::string MakeNpy(size_t count, uint64_t seed) {
  std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(count) + ",), }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  Le(&out, dict.size(), 2);
  return out + dict + RandomBytes(count * 4, seed);
}

}  // namespace lathe::snap::testing
