// The KServe Open Inference Protocol v2 over REST: request parsing (JSON
// tensors, flat or nested `data`, and the binary tensor extension) and
// response encoding; plus the plain `/predict` JSON forms.
//
// NaN and Infinity (JSON has neither): in a request, a floating-point element
// may be the string "NaN", "Infinity" or "-Infinity" (as protobuf's JSON
// mapping writes them; case-insensitive, "inf"/"+inf" also accepted). The bare
// tokens NaN / Infinity that Python's json.dumps writes are not JSON and get a
// 400 that says so (send allow_nan=False output, the strings, or binary data).
// In a response, non-finite floats are written as the same strings in JSON
// and as raw IEEE-754 values in binary outputs. `/predict` bodies follow the
// same rule.
//
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/serve/config.h"
#include "lathe/serve/tensor.h"

namespace lathe::serve {

struct RequestedOutput {
  std::string name;
  bool binary = false;
};

struct InferRequestMsg {
  std::string id;
  std::vector<Tensor> inputs;
  std::vector<RequestedOutput> outputs;  // empty: every output
  bool binary_data_output = false;       // parameters.binary_data_output
  std::optional<std::string> priority;   // parameters.priority (a level or high|normal|low)
  int64_t timeout_us = 0;                // parameters.timeout (µs, as Triton); 0 = none
};

// Parses a v2 infer request. `header_length` is the value of the
// Inference-Header-Content-Length header ("" when absent): then the body is that
// many bytes of JSON followed by the inputs' binary data in order.
// InvalidArgument with a precise message on any malformed part.
Result<InferRequestMsg> ParseInferRequest(std::string_view body, std::string_view header_length);

// Converts JSON `data` (flat or nested to the shape) into a tensor.
Result<Tensor> TensorFromJsonData(const std::string& name, DataType datatype, const Shape& shape,
                                  const Json& data);

struct EncodedResponse {
  std::string body;
  std::string content_type = "application/json";
  size_t header_length = 0;  // > 0: send Inference-Header-Content-Length
};

// Encodes a v2 infer response. `requested` empty: every output in JSON unless
// `binary_default`. Outputs not requested are left out.
EncodedResponse EncodeInferResponse(const std::string& model, int64_t version,
                                    const std::string& id, const std::vector<Tensor>& outputs,
                                    const std::vector<RequestedOutput>& requested,
                                    bool binary_default);

// Appends `t`'s elements as JSON: flat (`nested` false) or nested to its shape.
void AppendJsonData(std::string& out, const Tensor& t, bool nested);

// Parses a request body. Never throws (a number too large for a double is an
// error, not an exception); InvalidArgument json.malformed with the byte
// offset, or serve.json_nan when the body holds bare NaN/Infinity tokens.
Result<Json> ParseJsonBody(std::string_view body);

// The parse error of a JSON body, with the NaN/Infinity explanation when the
// body holds those tokens.
Status JsonBodyError(std::string_view body, const Status& parse_error);

// /predict and /v1/models/{m}:predict, tensor models:
//   {"instances": [row, ...]}            one input: each row is that input's row
//   {"instances": [{"x": row, ...}, ...]} several inputs by name
//   {"inputs": value | {"x": value}}      columnar (TF Serving)
// Rows become dimension 0. Datatypes come from the config (FP32 for numbers
// and BYTES for strings when not declared).
Result<std::vector<Tensor>> PredictRequestToTensors(const Json& body, const ModelConfig& config);
// {"predictions": [...]}: one output → its rows; several with the same rows →
// one object per row; otherwise {"predictions": {"name": data, ...}}.
std::string TensorsToPredictResponse(const std::vector<Tensor>& outputs);

}  // namespace lathe::serve
