// libFuzzer target for the request parser: KServe v2 JSON and binary bodies,
// the /predict forms, and the response encoder on whatever parses.
//
// Input layout: byte 0 chooses the mode (bit 0: binary extension, bit 1: also
// /predict), bytes 1-2 the JSON header length for the binary extension, the
// rest is the body. Build with -DLATHE_FUZZ=ON and clang; run e.g.
//   build-fuzz/src/lathe/serve/serve_fuzz_infer -max_total_time=60 src/lathe/serve/fuzz/corpus
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lathe/serve/config.h"
#include "lathe/serve/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lathe::serve;
  if (size < 3) return 0;
  const uint8_t mode = data[0];
  const size_t header_len = static_cast<size_t>(data[1]) | (static_cast<size_t>(data[2]) << 8);
  std::string_view body(reinterpret_cast<const char*>(data + 3), size - 3);
  std::string header = (mode & 1) ? std::to_string(header_len) : "";
  auto req = ParseInferRequest(body, header);
  if (req.ok()) {
    // Everything that parsed is valid data: encoding it back must not fail.
    for (const auto& t : req->inputs) {
      if (!ValidateTensorData(t).ok()) __builtin_trap();
    }
    auto enc = EncodeInferResponse("m", 1, req->id, req->inputs, req->outputs, req->binary_data_output);
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
