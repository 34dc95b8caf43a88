#include "lathe/serve/protocol.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "lathe/serve/instance.h"

namespace lathe::serve {
namespace {

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v(t.data.size() / 4);
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

std::string Raw(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

TEST(Protocol, FlatAndNestedJsonData) {
  auto flat = ParseInferRequest(
      R"({"id":"r1","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[1,2,3,4.5]}]})",
      "");
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  EXPECT_EQ(flat->id, "r1");
  EXPECT_EQ(Floats(flat->inputs[0]), std::vector<float>({1, 2, 3, 4.5}));
  auto nested = ParseInferRequest(
      R"({"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3,4.5]]}]})", "");
  ASSERT_TRUE(nested.ok()) << nested.status().ToString();
  EXPECT_EQ(nested->inputs[0].data, flat->inputs[0].data);
}

TEST(Protocol, EveryFixedDatatypeRoundTrips) {
  for (const char* dt : {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32",
                         "INT64", "FP16", "FP32", "FP64", "BF16"}) {
    std::string data = std::string(dt) == "BOOL" ? "[true,false,true]" : "[0,1,2]";
    auto r = ParseInferRequest(std::string(R"({"inputs":[{"name":"x","shape":[3],"datatype":")") +
                                   dt + R"(","data":)" + data + "}]}",
                               "");
    ASSERT_TRUE(r.ok()) << dt << ": " << r.status().ToString();
    EXPECT_EQ(r->inputs[0].data.size(), 3 * DataTypeSize(*ParseDataType(dt))) << dt;
    std::string out;
    AppendJsonData(out, r->inputs[0], false);
    EXPECT_EQ(out, data) << dt;
  }
}

TEST(Protocol, BytesTensors) {
  auto r = ParseInferRequest(
      R"({"inputs":[{"name":"s","shape":[2],"datatype":"BYTES","data":["héllo",""]}]})", "");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto elems = SplitBytesElements(r->inputs[0].data);
  ASSERT_TRUE(elems.ok());
  EXPECT_EQ((*elems)[0], "héllo");
  EXPECT_EQ((*elems)[1], "");
  std::string out;
  AppendJsonData(out, r->inputs[0], false);
  EXPECT_EQ(out, R"(["héllo",""])");
}

struct BadCase {
  const char* body;
  const char* header_length;
  const char* id;  // the catalog id of the error
};

class ProtocolErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ProtocolErrors, AreInvalidArgumentWithTheRightMessage) {
  auto r = ParseInferRequest(GetParam().body, GetParam().header_length);
  ASSERT_FALSE(r.ok()) << GetParam().body;
  EXPECT_TRUE(r.status().IsInvalidArgument());
  EXPECT_EQ(r.status().msg_id(), GetParam().id) << r.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    All, ProtocolErrors,
    ::testing::Values(
        BadCase{"{", "", "json.malformed"},
        BadCase{R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP64","data":[1E99999]}]})", "",
                "json.malformed"},
        BadCase{"[]", "", "json.not_object"},
        // A shape is not an allocation size (the short fuzz run's first find).
        BadCase{
            R"({"inputs":[{"name":"x","shape":[9223372036854775807],"datatype":"FP64","data":[1,2]}]})",
            "", "serve.data_count"},
        BadCase{
            R"({"inputs":[{"name":"x","shape":[4611686018427387904],"datatype":"INT8","data":[[1]]}]})",
            "", "serve.data_nesting"},
        BadCase{R"({"inputs":[]})", "", "serve.bad_request_field"},
        BadCase{R"({"inputs":[{"name":"x","shape":[1],"datatype":"FLOAT","data":[1]}]})", "",
                "serve.bad_datatype"},
        BadCase{R"({"inputs":[{"name":"x","shape":[3],"datatype":"FP32","data":[1,2]}]})", "",
                "serve.data_count"},
        BadCase{R"({"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3]]}]})",
                "", "serve.data_nesting"},
        BadCase{R"({"inputs":[{"name":"x","shape":[2],"datatype":"INT32","data":[1,2.5]}]})", "",
                "serve.bad_element"},
        BadCase{R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT8","data":[300]}]})", "",
                "serve.bad_element"},
        BadCase{R"({"inputs":[{"name":"x","shape":[1],"datatype":"UINT8","data":[-1]}]})", "",
                "serve.bad_element"},
        BadCase{R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":["one"]}]})", "",
                "serve.bad_element"},
        BadCase{R"({"inputs":[{"name":"x","shape":[1],"datatype":"BYTES","data":[1]}]})", "",
                "serve.bad_element"},
        BadCase{R"({"inputs":[{"name":"x","shape":[-1],"datatype":"FP32","data":[1]}]})", "",
                "serve.bad_shape"},
        BadCase{R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32"}]})", "", "serve.no_data"},
        BadCase{
            R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]},{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})",
            "", "serve.duplicate_input"},
        BadCase{R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[NaN]}]})", "",
                "serve.json_nan"},
        BadCase{R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[-Infinity]}]})", "",
                "serve.json_nan"},
        BadCase{
            R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}]})",
            "", "serve.binary_without_header"},
        BadCase{R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})", "999",
                "serve.bad_header_length"},
        BadCase{R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})", "x1",
                "serve.bad_header_length"}));

// A body that carries no binary data parses the same whether or not it has
// an Inference-Header-Content-Length: without it, common requests take a
// quick path that skips the JSON document, and must agree with the general one.
TEST(Protocol, QuickAndGeneralPathsAgree) {
  const std::vector<std::string> bodies = {
      R"({"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]})",
      R"( { "id" : "r1" , "inputs" : [ { "name" : "x" , "shape" : [ 2 , 2 ] , "datatype" : "FP32" ,
          "data" : [ -0 , 0.1 , 1e-46 , -3.4028235e38 ] } ] , "outputs" : [ { "name" : "y" } ] } )",
      R"({"inputs":[{"name":"a","shape":[3],"datatype":"FP64","data":[0.1,18446744073709551616,-9223372036854775809]},)"
      R"({"name":"b","shape":[2],"datatype":"INT64","data":[9223372036854775807,-9223372036854775808]},)"
      R"({"name":"c","shape":[2],"datatype":"UINT64","data":[18446744073709551615,0]},)"
      R"({"name":"d","shape":[4],"datatype":"INT8","data":[-128,127,-0,0]},)"
      R"({"name":"e","shape":[2],"datatype":"UINT8","data":[255,0]}]})",
      R"({"inputs":[{"data":[1],"name":"x","shape":[1],"datatype":"FP32"}]})",  // data first
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}],"id":"a","id":"b"})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT8","data":[128]}]})",  // out of range
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"UINT8","data":[-1]}]})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT32","data":[1.0]}]})",
      R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1]}]})",  // count
      R"({"inputs":[{"name":"x","shape":[9223372036854775807],"datatype":"FP64","data":[1]}]})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[01]}]})",  // not JSON
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1.]}]})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1e999]}]})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[NaN]}]})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]} x)",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]},{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})",
      R"({"inputs":[{"name":"x","shape":[-1],"datatype":"FP32","data":[1]}]})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"fp32","data":[1]}]})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]})",
      R"({"inputs":[{"name":"x\u00e9","shape":[1],"datatype":"FP32","data":[1]}]})",
      "{\"inputs\":[{\"name\":\"x\xc3\xa9\",\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]}]}",
      R"({"inputs":[]})", R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}])",
      // simdjson's reader: escapes, UTF-8, number edges, what may follow.
      R"({"id":"a\"b\u00e9\ud83d\ude00","inputs":[{"name":"x\n","shape":[1],"datatype":"FP32","data":[1]}]})",
      R"({"inputs":[{"name":"x\ud800","shape":[1],"datatype":"FP32","data":[1]}]})",  // lone
                                                                                      // surrogate
      "{\"inputs\":[{\"name\":\"x\xff\",\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]}]}",  // not
                                                                                               // UTF-8
      "{\"inputs\":[{\"name\":\"x\xc0\xaf\",\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]}]}",  // overlong
      R"({"inputs":[{"n\u0061me":"x","shape":[1],"datatype":"FP32","data":[1]}]})",
      R"({"inputs":[{"name":"x","shape":[5],"datatype":"FP64","data":[4.9e-324,2.4703282292062327e-324,1e-400,-0.0,1.7976931348623157e308]}]})",
      R"({"inputs":[{"name":"x","shape":[3],"datatype":"FP32","data":[3.4028235677973366e38,1.401298464324817e-45,0.30000000000000004]}]})",
      R"({"inputs":[{"name":"x","shape":[3],"datatype":"INT64","data":[-0,9223372036854775808,1]}]})",
      R"({"inputs":[{"name":"x","shape":[2],"datatype":"UINT64","data":[9223372036854775808,18446744073709551616]}]})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[-]}]})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1,]}]})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]},]})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]} {})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1] "x":1}]})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}],"outputs":[{"name":"y","name":"z"}]})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}],"outputs":[{}]})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[true]}]})",
      R"({"inputs":[{"name":"x","shape":[],"datatype":"FP32","data":[1]}]})",
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})"
      "\t\r\n ",
      std::string(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})") +
          std::string(1, '\0'),
      std::string(70000, ' ') +
          R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})",  // own parser
  };
  for (const auto& b : bodies) {
    auto quick = ParseInferRequest(b, "");
    auto general = ParseInferRequest(b, std::to_string(b.size()));
    ASSERT_EQ(quick.ok(), general.ok()) << b;
    if (!quick.ok()) {
      EXPECT_EQ(quick.status().ToString(), general.status().ToString()) << b;
      continue;
    }
    EXPECT_EQ(quick->id, general->id) << b;
    ASSERT_EQ(quick->inputs.size(), general->inputs.size()) << b;
    for (size_t i = 0; i < quick->inputs.size(); ++i) {
      EXPECT_EQ(quick->inputs[i].name, general->inputs[i].name) << b;
      EXPECT_EQ(quick->inputs[i].datatype, general->inputs[i].datatype) << b;
      EXPECT_EQ(quick->inputs[i].shape, general->inputs[i].shape) << b;
      EXPECT_EQ(quick->inputs[i].data, general->inputs[i].data)
          << b;  // bit for bit (-0 is +0, as before)
    }
    ASSERT_EQ(quick->outputs.size(), general->outputs.size()) << b;
    for (size_t i = 0; i < quick->outputs.size(); ++i) {
      EXPECT_EQ(quick->outputs[i].name, general->outputs[i].name) << b;
      EXPECT_EQ(quick->outputs[i].binary, general->outputs[i].binary) << b;
    }
  }
}

TEST(Protocol, BinaryExtension) {
  std::string json =
      R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}},)"
      R"({"name":"s","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":7}}],)"
      R"("outputs":[{"name":"y","parameters":{"binary_data":true}}]})";
  std::string s;
  AppendBytesElement(s, "abc");
  std::string body = json + Raw({1.5f, -2}) + s;
  auto r = ParseInferRequest(body, std::to_string(json.size()));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Floats(r->inputs[0]), std::vector<float>({1.5f, -2}));
  EXPECT_EQ(r->inputs[1].data, s);
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_TRUE(r->outputs[0].binary);

  // Truncated: one byte short.
  auto t = ParseInferRequest(body.substr(0, body.size() - 1), std::to_string(json.size()));
  EXPECT_EQ(t.status().msg_id(), "serve.binary_truncated");
  // Left over: one byte too many.
  auto l = ParseInferRequest(body + "z", std::to_string(json.size()));
  EXPECT_EQ(l.status().msg_id(), "serve.binary_left_over");
  // Wrong size for the shape.
  std::string json2 =
      R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":4}}]})";
  auto w = ParseInferRequest(json2 + Raw({1}), std::to_string(json2.size()));
  EXPECT_EQ(w.status().msg_id(), "serve.size_mismatch");
}

TEST(Protocol, NonFiniteValuesAreStrings) {
  auto r = ParseInferRequest(
      R"({"inputs":[{"name":"x","shape":[4],"datatype":"FP32","data":["NaN","Infinity","-inf",1]}]})",
      "");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto v = Floats(r->inputs[0]);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_TRUE(std::isinf(v[1]) && v[1] > 0);
  EXPECT_TRUE(std::isinf(v[2]) && v[2] < 0);
  std::string out;
  AppendJsonData(out, r->inputs[0], false);
  EXPECT_EQ(out, R"(["NaN","Infinity","-Infinity",1])");
  // A string "NaN" inside a BYTES tensor is just a string.
  EXPECT_TRUE(ParseInferRequest(
                  R"({"inputs":[{"name":"s","shape":[1],"datatype":"BYTES","data":["NaN"]}]})", "")
                  .ok());
}

TEST(Protocol, EncodeJsonAndBinaryOutputs) {
  Tensor y{"y", DataType::kFp32, {1, 2}, Raw({0.1f, 2})};
  Tensor z{"z", DataType::kInt64, {1}, std::string(8, '\0')};
  auto e = EncodeInferResponse("m", 3, "id-1", {y, z}, {}, false);
  EXPECT_EQ(e.header_length, 0u);
  EXPECT_EQ(e.body, R"({"model_name":"m","model_version":"3","id":"id-1","outputs":[)"
                    R"({"name":"y","datatype":"FP32","shape":[1,2],"data":[0.1,2]},)"
                    R"({"name":"z","datatype":"INT64","shape":[1],"data":[0]}]})");
  auto b = EncodeInferResponse("m", 3, "", {y, z}, {{"y", true}}, false);
  ASSERT_GT(b.header_length, 0u);
  auto header = ParseJson(b.body.substr(0, b.header_length));
  ASSERT_TRUE(header.ok());
  EXPECT_EQ((*header)["outputs"].size(), 1u);
  EXPECT_EQ((*header)["outputs"][0]["parameters"]["binary_data_size"], 8);
  EXPECT_EQ(b.body.substr(b.header_length), y.data);
}

TEST(Protocol, EncodedStringsAreEscapedAsNlohmannWritesThem) {
  for (std::string id : {"plain-id_1 ~", "q\"uote", "back\\slash", "ctl\x01\x1f", "del\x7f",
                         "caf\xc3\xa9", "bad\xff"}) {
    auto e = EncodeInferResponse("m", 1, id, {}, {}, false);
    std::string want =
        "\"id\":" + Json(id).dump(-1, ' ', false, Json::error_handler_t::replace) + ",";
    EXPECT_NE(e.body.find(want), std::string::npos) << e.body;
  }
}

TEST(Protocol, PredictForms) {
  ModelConfig c = DefaultModelConfig("m", "torchscript");
  auto t = PredictRequestToTensors(*ParseJson(R"({"instances":[[1,2],[3,4],[5,6]]})"), c);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)[0].shape, Shape({3, 2}));
  EXPECT_EQ((*t)[0].datatype, DataType::kFp32);
  auto named =
      PredictRequestToTensors(*ParseJson(R"({"instances":[{"a":1,"b":"x"},{"a":2,"b":"y"}]})"), c);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ((*named)[1].datatype, DataType::kBytes);
  EXPECT_EQ(TensorsToPredictResponse({(*t)[0]}), R"({"predictions":[[1,2],[3,4],[5,6]]})");
  EXPECT_EQ(TensorsToPredictResponse(*named),
            R"({"predictions":[{"a":1,"b":"x"},{"a":2,"b":"y"}]})");
  EXPECT_FALSE(PredictRequestToTensors(*ParseJson(R"({"rows":[1]})"), c).ok());
}

TEST(Tensor, HalfConversions) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f) << f;
  }
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(1e6f))));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(NAN))));
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.5f)), 1.5f);
}

TEST(Instance, MergeAndSplit) {
  Batch batch;
  for (int i = 0; i < 3; ++i) {
    auto r = std::make_unique<PendingRequest>();
    r->rows = i + 1;
    std::vector<float> v(static_cast<size_t>(2 * (i + 1)), static_cast<float>(i));
    r->inputs.push_back(Tensor{"x", DataType::kFp32, {i + 1, 2}, Raw(v)});
    std::string s;
    for (int k = 0; k <= i; ++k)
      AppendBytesElement(s, std::string(static_cast<size_t>(k + i), 'a'));
    r->inputs.push_back(Tensor{"s", DataType::kBytes, {i + 1}, s});
    batch.push_back(std::move(r));
  }
  auto merged = MergeInputs(batch);
  EXPECT_EQ(merged[0].shape, Shape({6, 2}));
  EXPECT_EQ(merged[1].shape, Shape({6}));
  auto split = SplitOutputs(merged, {1, 2, 3});
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*split)[i][0].data, batch[i]->inputs[0].data);
    EXPECT_EQ((*split)[i][1].data, batch[i]->inputs[1].data);
    EXPECT_EQ((*split)[i][0].shape, batch[i]->inputs[0].shape);
  }
  Tensor wrong{"y", DataType::kFp32, {5}, Raw({1, 2, 3, 4, 5})};
  EXPECT_EQ(SplitOutputs({wrong}, {1, 2, 3}).status().code(), Code::kInternal);
}

}  // namespace
}  // namespace lathe::serve
