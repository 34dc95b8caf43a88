#include "lathe/serve/tensor.h"

#include <array>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace lathe::serve {
namespace {

struct TypeInfo {
  DataType type;
  std::string_view name;
  size_t size;
};

constexpr std::array<TypeInfo, 14> kTypes = {{
    {DataType::kBool, "BOOL", 1},
    {DataType::kUint8, "UINT8", 1},
    {DataType::kUint16, "UINT16", 2},
    {DataType::kUint32, "UINT32", 4},
    {DataType::kUint64, "UINT64", 8},
    {DataType::kInt8, "INT8", 1},
    {DataType::kInt16, "INT16", 2},
    {DataType::kInt32, "INT32", 4},
    {DataType::kInt64, "INT64", 8},
    {DataType::kFp16, "FP16", 2},
    {DataType::kFp32, "FP32", 4},
    {DataType::kFp64, "FP64", 8},
    {DataType::kBytes, "BYTES", 0},
    {DataType::kBf16, "BF16", 2},
}};

}  // namespace

std::string_view DataTypeName(DataType t) {
  for (const auto& i : kTypes) {
    if (i.type == t) return i.name;
  }
  return "INVALID";
}

std::optional<DataType> ParseDataType(std::string_view name) {
  for (const auto& i : kTypes) {
    if (i.name == name) return i.type;
  }
  return std::nullopt;
}

std::string DataTypeNames() {
  std::string s;
  for (const auto& i : kTypes) s += (s.empty() ? "" : ", ") + std::string(i.name);
  return s;
}

size_t DataTypeSize(DataType t) {
  for (const auto& i : kTypes) {
    if (i.type == t) return i.size;
  }
  return 0;
}

bool IsFloat(DataType t) {
  return t == DataType::kFp16 || t == DataType::kFp32 || t == DataType::kFp64 ||
         t == DataType::kBf16;
}

int64_t ElementCount(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

std::string ShapeString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status ValidateTensorData(const Tensor& t) {
  int64_t n = ElementCount(t.shape);
  if (n < 0) {
    return Status::Msg(Code::kInvalidArgument, "serve.bad_shape",
                       {{"tensor", t.name}, {"shape", ShapeString(t.shape)}});
  }
  if (t.datatype == DataType::kBytes) {
    auto elems = SplitBytesElements(t.data);
    if (!elems.ok() || static_cast<int64_t>(elems->size()) != n) {
      return Status::Msg(Code::kInvalidArgument, "serve.bytes_mismatch",
                         {{"tensor", t.name},
                          {"expected", std::to_string(n)},
                          {"got", elems.ok() ? std::to_string(elems->size()) : "malformed"}});
    }
    return Status::OK();
  }
  size_t want = static_cast<size_t>(n) * DataTypeSize(t.datatype);
  if (t.data.size() != want) {
    return Status::Msg(Code::kInvalidArgument, "serve.size_mismatch",
                       {{"tensor", t.name},
                        {"shape", ShapeString(t.shape)},
                        {"datatype", std::string(DataTypeName(t.datatype))},
                        {"expected", std::to_string(want)},
                        {"got", std::to_string(t.data.size())}});
  }
  return Status::OK();
}

void AppendBytesElement(std::string& out, std::string_view element) {
  uint32_t len = static_cast<uint32_t>(element.size());
  char le[4] = {static_cast<char>(len & 0xff), static_cast<char>((len >> 8) & 0xff),
                static_cast<char>((len >> 16) & 0xff), static_cast<char>((len >> 24) & 0xff)};
  out.append(le, 4);
  out.append(element);
}

Result<std::vector<size_t>> BytesElementOffsets(std::string_view data) {
  std::vector<size_t> offsets;
  size_t i = 0;
  while (i < data.size()) {
    offsets.push_back(i);
    if (data.size() - i < 4) return Status::InvalidArgument("truncated BYTES element length");
    const auto* p = reinterpret_cast<const unsigned char*>(data.data() + i);
    uint64_t len = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint64_t>(p[3]) << 24);
    if (data.size() - i - 4 < len) return Status::InvalidArgument("truncated BYTES element");
    i += 4 + len;
  }
  offsets.push_back(i);
  return offsets;
}

Result<std::vector<std::string_view>> SplitBytesElements(std::string_view data) {
  ASSIGN_OR_RETURN(std::vector<size_t> off, BytesElementOffsets(data));
  std::vector<std::string_view> out;
  out.reserve(off.size() - 1);
  for (size_t k = 0; k + 1 < off.size(); ++k) {
    out.push_back(data.substr(off[k] + 4, off[k + 1] - off[k] - 4));
  }
  return out;
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000) {  // Inf or NaN
    return sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 : 0);
  }
  if (absx >= 0x477ff000) return sign | 0x7c00;  // overflow to Inf
  if (absx < 0x38800000) {                       // subnormal or zero in half
    if (absx < 0x33000000) return sign;
    uint32_t exp = absx >> 23;
    uint32_t mant = (absx & 0x7fffff) | 0x800000;
    // value = mant * 2^(exp-150) = half_mant * 2^-24, so half_mant = mant >> (126 - exp).
    uint32_t shift = 126 - exp;
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1))) ++half_mant;
    return sign | static_cast<uint16_t>(half_mant);
  }
  uint32_t rounded = absx + 0xfff + ((absx >> 13) & 1);  // round to nearest even
  return sign | static_cast<uint16_t>((rounded - 0x38000000) >> 13);
}

float Bf16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace lathe::serve
