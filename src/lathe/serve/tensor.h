// Tensors as the server moves them: a name, a KServe v2 datatype, a shape and
// the bytes (row-major, little-endian; BYTES elements as 4-byte length + bytes,
// the v2 binary layout). Plain values, movable between threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/serve/backend_api.h"

namespace lathe::serve {

// Values equal LatheDataType (backend_api.h) so they cross the ABI unchanged.
enum class DataType : int32_t {
  kInvalid = LATHE_TYPE_INVALID,
  kBool = LATHE_TYPE_BOOL,
  kUint8 = LATHE_TYPE_UINT8,
  kUint16 = LATHE_TYPE_UINT16,
  kUint32 = LATHE_TYPE_UINT32,
  kUint64 = LATHE_TYPE_UINT64,
  kInt8 = LATHE_TYPE_INT8,
  kInt16 = LATHE_TYPE_INT16,
  kInt32 = LATHE_TYPE_INT32,
  kInt64 = LATHE_TYPE_INT64,
  kFp16 = LATHE_TYPE_FP16,
  kFp32 = LATHE_TYPE_FP32,
  kFp64 = LATHE_TYPE_FP64,
  kBytes = LATHE_TYPE_BYTES,
  kBf16 = LATHE_TYPE_BF16,
};

// "FP32", "BYTES", ...; "INVALID" for kInvalid.
std::string_view DataTypeName(DataType t);
// The v2 names (case-sensitive, as the protocol writes them); nullopt otherwise.
std::optional<DataType> ParseDataType(std::string_view name);
// Every valid name, comma-separated, for error messages.
std::string DataTypeNames();
// Bytes per element; 0 for BYTES (variable) and kInvalid.
size_t DataTypeSize(DataType t);
bool IsFloat(DataType t);  // FP16, FP32, FP64, BF16

using Shape = std::vector<int64_t>;
// Product of the dimensions (1 for rank 0); -1 if any is negative or it overflows.
int64_t ElementCount(const Shape& shape);
std::string ShapeString(const Shape& shape);  // "[2, 3]"

struct Tensor {
  std::string name;
  DataType datatype = DataType::kInvalid;
  Shape shape;
  std::string data;  // raw bytes, see above
};

// Checks that `data` fits the datatype and shape: a fixed-size type needs
// ElementCount*size bytes; BYTES needs exactly ElementCount well-formed
// elements. InvalidArgument naming the tensor otherwise.
Status ValidateTensorData(const Tensor& t);

// BYTES helpers.
void AppendBytesElement(std::string& out, std::string_view element);
// Splits BYTES data into its elements; InvalidArgument when truncated.
Result<std::vector<std::string_view>> SplitBytesElements(std::string_view data);
// Byte offsets of each element's start, plus the end (size n+1).
Result<std::vector<size_t>> BytesElementOffsets(std::string_view data);

// IEEE half <-> float (round to nearest even).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Bf16ToFloat(uint16_t b);
uint16_t FloatToBf16(float f);

}  // namespace lathe::serve
