// libFuzzer target for the request parser: KServe v2 JSON and binary bodies,
// the /predict forms, and the response encoder on whatever parses.
//
// Input layout: byte 0 chooses the mode (bit 0: binary extension, bit 1: also
// /predict), bytes 1-2 the JSON header length for the binary extension, the
// rest is the body. Without the binary extension the body is also parsed as
// if a header length covered it all, and the two results must agree. Build with -DLATHE_FUZZ=ON and
// clang; run e.g.
//   build-fuzz/src/lathe/serve/serve_fuzz_infer -max_total_time=60 src/lathe/serve/fuzz/corpus
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lathe/serve/config.h"
#include "lathe/serve/protocol.h"

namespace {

bool SameRequest(const lathe::serve::InferRequestMsg& a, const lathe::serve::InferRequestMsg& b) {
  if (a.id != b.id || a.inputs.size() != b.inputs.size() || a.outputs.size() != b.outputs.size() ||
      a.binary_data_output != b.binary_data_output || a.priority != b.priority ||
      a.timeout_us != b.timeout_us) {
    return false;
  }
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const auto &x = a.inputs[i], &y = b.inputs[i];
    if (x.name != y.name || x.datatype != y.datatype || x.shape != y.shape || x.data != y.data)
      return false;
  }
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    if (a.outputs[i].name != b.outputs[i].name || a.outputs[i].binary != b.outputs[i].binary)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lathe::serve;
  if (size < 3) return 0;
  const uint8_t mode = data[0];
  const size_t header_len = static_cast<size_t>(data[1]) | (static_cast<size_t>(data[2]) << 8);
  std::string_view body(reinterpret_cast<const char*>(data + 3), size - 3);
  std::string header = (mode & 1) ? std::to_string(header_len) : "";
  auto req = ParseInferRequest(body, header);
  if (!(mode & 1)) {
    // A JSON body parses the same with a header length that covers it all,
    // which skips the quick reader of common requests: the two must agree,
    // on the error's wording too.
    auto general = ParseInferRequest(body, std::to_string(body.size()));
    if (req.ok() != general.ok()) __builtin_trap();
    if (!req.ok() && req.status().ToString() != general.status().ToString()) __builtin_trap();
    if (req.ok() && !SameRequest(*req, *general)) __builtin_trap();
  }
  if (req.ok()) {
    // Everything that parsed is valid data: encoding it back must not fail.
    for (const auto& t : req->inputs) {
      if (!ValidateTensorData(t).ok()) __builtin_trap();
    }
    auto enc =
        EncodeInferResponse("m", 1, req->id, req->inputs, req->outputs, req->binary_data_output);
    if (enc.body.empty()) __builtin_trap();
    TensorsToPredictResponse(req->inputs);
  }
  if (mode & 2) {
    auto j = ParseJsonBody(body);
    if (j.ok()) {
      ModelConfig c = DefaultModelConfig("m", "identity");
      auto t = PredictRequestToTensors(*j, c);
      if (t.ok()) TensorsToPredictResponse(*t);
    }
  }
  return 0;
}
