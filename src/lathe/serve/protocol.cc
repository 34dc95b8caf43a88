#include "lathe/serve/protocol.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <simdjson.h>

namespace lathe::serve {
namespace {

constexpr size_t kMaxRank = 32;

Status Bad(std::string id, MsgArgs args) {
  return Status::Msg(Code::kInvalidArgument, std::move(id), std::move(args));
}

template <typename T>
void Put(std::string& out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out.append(buf, sizeof(T));
}

std::optional<double> NonFinite(const std::string& s) {
  std::string l;
  for (char c : s) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (l == "nan" || l == "+nan" || l == "-nan") return std::numeric_limits<double>::quiet_NaN();
  if (l == "infinity" || l == "+infinity" || l == "inf" || l == "+inf")
    return std::numeric_limits<double>::infinity();
  if (l == "-infinity" || l == "-inf") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

Status ElementError(const std::string& name, size_t index, DataType dt, const Json& v) {
  std::string got = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (got.size() > 40) got = got.substr(0, 37) + "...";
  return Bad("serve.bad_element", {{"tensor", name},
                                   {"index", std::to_string(index)},
                                   {"datatype", std::string(DataTypeName(dt))},
                                   {"value", got}});
}

template <typename T>
bool PutInt(std::string& out, const Json& v) {
  if (v.is_number_unsigned()) {
    uint64_t x = v.get<uint64_t>();
    if (x > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    Put<T>(out, static_cast<T>(x));
    return true;
  }
  if (v.is_number_integer()) {
    int64_t x = v.get<int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (x < 0 || static_cast<uint64_t>(x) > static_cast<uint64_t>(std::numeric_limits<T>::max()))
        return false;
    } else {
      if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          x > static_cast<int64_t>(std::numeric_limits<T>::max())) {
        return false;
      }
    }
    Put<T>(out, static_cast<T>(x));
    return true;
  }
  return false;
}

std::optional<double> FloatValue(const Json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return NonFinite(v.get<std::string>());
  return std::nullopt;
}

Status AppendElement(std::string& out, DataType dt, const Json& v, const std::string& name,
                     size_t index) {
  bool ok = false;
  switch (dt) {
    case DataType::kBool:
      if (v.is_boolean()) {
        out += static_cast<char>(v.get<bool>() ? 1 : 0);
        ok = true;
      } else if (v.is_number_integer() && (v.get<int64_t>() == 0 || v.get<int64_t>() == 1)) {
        out += static_cast<char>(v.get<int64_t>());
        ok = true;
      }
      break;
    case DataType::kUint8:
      ok = PutInt<uint8_t>(out, v);
      break;
    case DataType::kUint16:
      ok = PutInt<uint16_t>(out, v);
      break;
    case DataType::kUint32:
      ok = PutInt<uint32_t>(out, v);
      break;
    case DataType::kUint64:
      ok = PutInt<uint64_t>(out, v);
      break;
    case DataType::kInt8:
      ok = PutInt<int8_t>(out, v);
      break;
    case DataType::kInt16:
      ok = PutInt<int16_t>(out, v);
      break;
    case DataType::kInt32:
      ok = PutInt<int32_t>(out, v);
      break;
    case DataType::kInt64:
      ok = PutInt<int64_t>(out, v);
      break;
    case DataType::kFp16:
    case DataType::kBf16:
    case DataType::kFp32:
    case DataType::kFp64: {
      auto d = FloatValue(v);
      if (!d) break;
      ok = true;
      if (dt == DataType::kFp64) {
        Put<double>(out, *d);
      } else if (dt == DataType::kFp32) {
        Put<float>(out, static_cast<float>(*d));
      } else if (dt == DataType::kFp16) {
        Put<uint16_t>(out, FloatToHalf(static_cast<float>(*d)));
      } else {
        Put<uint16_t>(out, FloatToBf16(static_cast<float>(*d)));
      }
      break;
    }
    case DataType::kBytes:
      if (v.is_string()) {
        AppendBytesElement(out, v.get_ref<const std::string&>());
        ok = true;
      }
      break;
    default:
      break;
  }
  return ok ? Status::OK() : ElementError(name, index, dt, v);
}

// Walks nested `data` that must match `shape` exactly from dimension `dim`.
Status AppendNested(std::string& out, DataType dt, const Json& data, const Shape& shape, size_t dim,
                    const std::string& name, size_t& index) {
  if (!data.is_array() || static_cast<int64_t>(data.size()) != shape[dim]) {
    return Bad("serve.data_nesting",
               {{"tensor", name}, {"shape", ShapeString(shape)}, {"dim", std::to_string(dim)}});
  }
  for (const auto& v : data) {
    if (dim + 1 < shape.size()) {
      RETURN_IF_ERROR(AppendNested(out, dt, v, shape, dim + 1, name, index));
    } else {
      RETURN_IF_ERROR(AppendElement(out, dt, v, name, index++));
    }
  }
  return Status::OK();
}

Result<Shape> ParseShape(const Json& j, const std::string& name) {
  if (!j.is_array() || j.size() > kMaxRank)
    return Bad("serve.bad_shape", {{"tensor", name}, {"shape", j.dump()}});
  Shape s;
  for (const auto& d : j) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return Bad("serve.bad_shape", {{"tensor", name}, {"shape", j.dump()}});
    }
    s.push_back(d.get<int64_t>());
  }
  if (ElementCount(s) < 0) return Bad("serve.bad_shape", {{"tensor", name}, {"shape", j.dump()}});
  return s;
}

// ---- output writing ----

void AppendJsonString(std::string& out, std::string_view s) {
  // Printable ASCII without quotes or backslashes (names, ids) is written as
  // is, which is what nlohmann writes; anything else goes through it.
  bool plain = std::all_of(s.begin(), s.end(),
                           [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
  if (!plain) {
    out += Json(std::string(s)).dump(-1, ' ', false, Json::error_handler_t::replace);
    return;
  }
  out += '"';
  out += s;
  out += '"';
}

template <typename F>
void AppendFloat(std::string& out, F f) {
  if (std::isnan(f)) {
    out += "\"NaN\"";
  } else if (std::isinf(f)) {
    out += f > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  } else {
    fmt::format_to(std::back_inserter(out), "{}", f);
  }
}

class ElementWriter {
 public:
  explicit ElementWriter(const Tensor& t) : t_(t) {
    if (t.datatype == DataType::kBytes) {
      auto off = BytesElementOffsets(t.data);
      if (off.ok()) offsets_ = std::move(*off);
    }
  }
  int64_t count() const {
    return t_.datatype == DataType::kBytes
               ? static_cast<int64_t>(offsets_.empty() ? 0 : offsets_.size() - 1)
               : ElementCount(t_.shape);
  }
  void Write(std::string& out, int64_t i) const {
    const char* p = t_.data.data();
    size_t k = static_cast<size_t>(i);
    switch (t_.datatype) {
      case DataType::kBool:
        out += p[k] ? "true" : "false";
        break;
      case DataType::kUint8:
        Int<uint8_t>(out, p, k);
        break;
      case DataType::kUint16:
        Int<uint16_t>(out, p, k);
        break;
      case DataType::kUint32:
        Int<uint32_t>(out, p, k);
        break;
      case DataType::kUint64:
        Int<uint64_t>(out, p, k);
        break;
      case DataType::kInt8:
        Int<int8_t>(out, p, k);
        break;
      case DataType::kInt16:
        Int<int16_t>(out, p, k);
        break;
      case DataType::kInt32:
        Int<int32_t>(out, p, k);
        break;
      case DataType::kInt64:
        Int<int64_t>(out, p, k);
        break;
      case DataType::kFp16:
        AppendFloat(out, HalfToFloat(Get<uint16_t>(p, k)));
        break;
      case DataType::kBf16:
        AppendFloat(out, Bf16ToFloat(Get<uint16_t>(p, k)));
        break;
      case DataType::kFp32:
        AppendFloat(out, Get<float>(p, k));
        break;
      case DataType::kFp64:
        AppendFloat(out, Get<double>(p, k));
        break;
      case DataType::kBytes:
        AppendJsonString(out,
                         std::string_view(p + offsets_[k] + 4, offsets_[k + 1] - offsets_[k] - 4));
        break;
      default:
        out += "null";
    }
  }

 private:
  template <typename T>
  static T Get(const char* p, size_t k) {
    T v;
    std::memcpy(&v, p + k * sizeof(T), sizeof(T));
    return v;
  }
  template <typename T>
  static void Int(std::string& out, const char* p, size_t k) {
    fmt::format_to(
        std::back_inserter(out), "{}",
        static_cast<std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>(Get<T>(p, k)));
  }
  const Tensor& t_;
  std::vector<size_t> offsets_;
};

void AppendNestedOut(std::string& out, const ElementWriter& w, const Shape& shape, size_t dim,
                     int64_t& index) {
  out += '[';
  for (int64_t i = 0; i < shape[dim]; ++i) {
    if (i) out += ',';
    if (dim + 1 < shape.size()) {
      AppendNestedOut(out, w, shape, dim + 1, index);
    } else {
      w.Write(out, index++);
    }
  }
  out += ']';
}

Result<Tensor> ParseInput(const Json& in, size_t i, std::string_view& binary, bool has_binary) {
  if (!in.is_object())
    return Bad("serve.bad_request_field", {{"field", "inputs[" + std::to_string(i) + "]"}});
  auto name = GetString(in, "name");
  if (!name.ok())
    return Bad("serve.bad_request_field", {{"field", "inputs[" + std::to_string(i) + "].name"}});
  auto dts = GetString(in, "datatype");
  if (!dts.ok())
    return Bad("serve.bad_request_field",
               {{"field", "inputs[" + std::to_string(i) + "].datatype"}});
  auto dt = ParseDataType(*dts);
  if (!dt)
    return Bad("serve.bad_datatype",
               {{"tensor", *name}, {"datatype", *dts}, {"allowed", DataTypeNames()}});
  if (!in.contains("shape"))
    return Bad("serve.bad_request_field", {{"field", "inputs[" + std::to_string(i) + "].shape"}});
  ASSIGN_OR_RETURN(Shape shape, ParseShape(in["shape"], *name));
  const Json* params =
      in.contains("parameters") && in["parameters"].is_object() ? &in["parameters"] : nullptr;
  if (params != nullptr && params->contains("binary_data_size")) {
    const Json& b = (*params)["binary_data_size"];
    if (!has_binary) return Bad("serve.binary_without_header", {{"tensor", *name}});
    if (!b.is_number_unsigned())
      return Bad("serve.bad_request_field", {{"field", *name + ".parameters.binary_data_size"}});
    if (in.contains("data")) return Bad("serve.data_and_binary", {{"tensor", *name}});
    uint64_t size = b.get<uint64_t>();
    if (size > binary.size()) {
      return Bad("serve.binary_truncated", {{"tensor", *name},
                                            {"size", std::to_string(size)},
                                            {"left", std::to_string(binary.size())}});
    }
    Tensor t{*name, *dt, shape, std::string(binary.substr(0, size))};
    binary.remove_prefix(size);
    RETURN_IF_ERROR(ValidateTensorData(t));
    return t;
  }
  if (!in.contains("data")) return Bad("serve.no_data", {{"tensor", *name}});
  return TensorFromJsonData(*name, *dt, shape, in["data"]);
}

// The common request, read with simdjson's On-Demand API: object keys each
// once, known ones only (no parameters), `data` a flat list of numbers after
// `shape` and `datatype`, outputs by name only. It builds exactly what the
// general path builds from the nlohmann document, without the document's
// allocations: numbers as nlohmann keeps them (a 64-bit integer when the text
// has no fraction or exponent and fits, -0 included, else a double). Anything
// else, every malformed request included, gives nullopt and the general path
// takes the request (and words its error).
namespace quick {

namespace od = simdjson::ondemand;

// Bodies above this are read with a parser of their own rather than the
// thread's, so that no I/O thread keeps a large parser's buffers.
constexpr size_t kThreadParserMaxBytes = 64 << 10;

struct Number {
  od::number_type type = od::number_type::signed_integer;
  int64_t i = 0;   // signed_integer
  uint64_t u = 0;  // unsigned_integer (>= 2^63)
  double d = 0;    // the value as a double (nlohmann's get<double>())
};

bool GetNumber(od::value v, Number& n) {
  if (v.get_number_type().get(n.type)) return false;
  switch (n.type) {
    case od::number_type::signed_integer:
      if (v.get_int64().get(n.i)) return false;  // below -2^63: a double in nlohmann
      n.d = static_cast<double>(n.i);
      return true;
    case od::number_type::unsigned_integer:
      if (v.get_uint64().get(n.u)) return false;  // 2^64 and above: a double in nlohmann
      n.d = static_cast<double>(n.u);
      return true;
    default:
      return !v.get_double().get(n.d);  // 1e999 is an error in both
  }
}

template <typename T>
bool PutInt(std::string& out, const Number& n) {
  if (n.type == od::number_type::unsigned_integer) {
    if (n.u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    Put<T>(out, static_cast<T>(n.u));
    return true;
  }
  if (n.type != od::number_type::signed_integer) return false;
  if constexpr (std::is_unsigned_v<T>) {
    if (n.i < 0 ||
        static_cast<uint64_t>(n.i) > static_cast<uint64_t>(std::numeric_limits<T>::max()))
      return false;
  } else {
    if (n.i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        n.i > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      return false;
    }
  }
  Put<T>(out, static_cast<T>(n.i));
  return true;
}

// As AppendElement for a number; false for the datatypes left to the general path.
bool PutNumber(std::string& out, DataType dt, const Number& n) {
  switch (dt) {
    case DataType::kFp32:
      Put<float>(out, static_cast<float>(n.d));
      return true;
    case DataType::kFp64:
      Put<double>(out, n.d);
      return true;
    case DataType::kUint8:
      return PutInt<uint8_t>(out, n);
    case DataType::kUint16:
      return PutInt<uint16_t>(out, n);
    case DataType::kUint32:
      return PutInt<uint32_t>(out, n);
    case DataType::kUint64:
      return PutInt<uint64_t>(out, n);
    case DataType::kInt8:
      return PutInt<int8_t>(out, n);
    case DataType::kInt16:
      return PutInt<int16_t>(out, n);
    case DataType::kInt32:
      return PutInt<int32_t>(out, n);
    case DataType::kInt64:
      return PutInt<int64_t>(out, n);
    default:
      return false;
  }
}

bool GetString(od::value v, std::string& out) {
  std::string_view s;
  if (v.get_string().get(s)) return false;
  out = s;
  return true;
}

bool Dims(od::value v, Shape& shape) {
  od::array a;
  if (v.get_array().get(a)) return false;
  for (auto d : a) {
    int64_t x = 0;
    od::value dv;
    if (d.get(dv) || dv.get_int64().get(x) || x < 0 || shape.size() == kMaxRank) return false;
    shape.push_back(x);
  }
  return !shape.empty() && ElementCount(shape) >= 0;
}

bool Data(od::value v, Tensor& t, size_t text_bytes) {
  const int64_t n = ElementCount(t.shape);
  od::array a;
  if (n <= 0 || v.get_array().get(a)) return false;
  // The shape is the client's word; the text bounds how many elements follow.
  t.data.reserve(std::min(static_cast<uint64_t>(n), text_bytes / 2 + 1) * DataTypeSize(t.datatype));
  int64_t count = 0;
  for (auto e : a) {
    od::value ev;
    Number x;
    if (++count > n || e.get(ev) || !GetNumber(ev, x) || !PutNumber(t.data, t.datatype, x))
      return false;
  }
  return count == n;
}

bool Input(od::value v, Tensor& t, size_t text_bytes) {
  bool name = false, datatype = false, shape = false, data = false;
  od::object o;
  if (v.get_object().get(o)) return false;
  for (auto f : o) {
    od::field field;
    if (std::move(f).get(field)) return false;
    od::raw_json_string key = field.key();
    std::string_view dts;
    if (key == "name" && !name && GetString(field.value(), t.name)) {
      name = true;
    } else if (key == "datatype" && !datatype && !field.value().get_string().get(dts)) {
      auto dt = ParseDataType(dts);
      if (!dt) return false;
      t.datatype = *dt;
      datatype = true;
    } else if (key == "shape" && !shape && Dims(field.value(), t.shape)) {
      shape = true;
    } else if (key == "data" && !data && datatype && shape && Data(field.value(), t, text_bytes)) {
      data = true;
    } else {
      return false;
    }
  }
  return name && data;
}

bool Inputs(od::value v, std::vector<Tensor>& inputs, size_t text_bytes) {
  od::array a;
  if (v.get_array().get(a)) return false;
  for (auto e : a) {
    od::value ev;
    Tensor t;
    if (e.get(ev) || !Input(ev, t, text_bytes)) return false;
    for (const auto& o : inputs) {
      if (o.name == t.name) return false;
    }
    inputs.push_back(std::move(t));
  }
  return !inputs.empty();
}

bool Outputs(od::value v, std::vector<RequestedOutput>& outputs) {
  od::array a;
  if (v.get_array().get(a)) return false;
  for (auto e : a) {
    od::object o;
    if (e.get_object().get(o)) return false;
    RequestedOutput out;
    bool name = false;
    for (auto f : o) {
      od::field field;
      if (std::move(f).get(field) || name || field.key() != "name" ||
          !GetString(field.value(), out.name))
        return false;
      name = true;
    }
    if (!name) return false;
    outputs.push_back(std::move(out));
  }
  return true;
}

std::optional<InferRequestMsg> Read(od::parser& parser, const simdjson::padded_string_view& text) {
  InferRequestMsg m;
  bool id = false, inputs = false, outputs = false;
  od::document doc;
  od::object root;
  if (parser.iterate(text).get(doc) || doc.get_object().get(root)) return std::nullopt;
  for (auto f : root) {
    od::field field;
    if (std::move(f).get(field)) return std::nullopt;
    od::raw_json_string key = field.key();
    if (key == "id" && !id && GetString(field.value(), m.id)) {
      id = true;
    } else if (key == "inputs" && !inputs && Inputs(field.value(), m.inputs, text.length())) {
      inputs = true;
    } else if (key == "outputs" && !outputs && Outputs(field.value(), m.outputs)) {
      outputs = true;
    } else {
      return std::nullopt;
    }
  }
  // Nothing may follow the object: at the end, current_location says OUT_OF_BOUNDS.
  if (!inputs || doc.current_location().error() != simdjson::OUT_OF_BOUNDS) return std::nullopt;
  return m;
}

// simdjson reads up to SIMDJSON_PADDING bytes past the text. A string_view
// says nothing of what lies after it, so the body is copied into a buffer
// that has them (initialized); the copy costs little next to the parse.
std::optional<InferRequestMsg> Parse(std::string_view body) {
  thread_local std::string padded;
  thread_local od::parser thread_parser;
  const bool big = body.size() > kThreadParserMaxBytes;
  std::string big_padded;
  std::string& buf = big ? big_padded : padded;
  if (buf.size() < body.size() + simdjson::SIMDJSON_PADDING)
    buf.resize(body.size() + simdjson::SIMDJSON_PADDING);
  std::memcpy(buf.data(), body.data(), body.size());
  simdjson::padded_string_view text(buf.data(), body.size(), buf.size());
  if (!big) return Read(thread_parser, text);
  od::parser parser;
  return Read(parser, text);
}

}  // namespace quick

}  // namespace

Status JsonBodyError(std::string_view body, const Status& parse_error) {
  static constexpr std::string_view kTokens[] = {"NaN", "Infinity"};
  for (auto tok : kTokens) {
    for (size_t p = body.find(tok); p != std::string_view::npos; p = body.find(tok, p + 1)) {
      // Outside a string: the previous non-space character is not a quote.
      size_t q = p;
      while (q > 0 && (body[q - 1] == ' ' || body[q - 1] == '-')) --q;
      if (q == 0 || body[q - 1] != '"') return Bad("serve.json_nan", {});
    }
  }
  return parse_error;
}

Result<Json> ParseJsonBody(std::string_view body) {
  Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return j;
  std::string offset = "?";
  try {  // parse again only to learn where it failed
    Json unused = Json::parse(body.begin(), body.end());
    (void)unused;  // parsed only for the exception that says where it fails
  } catch (const Json::parse_error& e) {
    offset = std::to_string(e.byte);
  } catch (const Json::exception&) {  // e.g. out_of_range: a number too large
  }
  return JsonBodyError(body,
                       Status::Msg(Code::kInvalidArgument, "json.malformed", {{"offset", offset}}));
}

Result<Tensor> TensorFromJsonData(const std::string& name, DataType datatype, const Shape& shape,
                                  const Json& data) {
  int64_t n = ElementCount(shape);
  if (n < 0) return Bad("serve.bad_shape", {{"tensor", name}, {"shape", ShapeString(shape)}});
  Tensor t{name, datatype, shape, {}};
  // Reserved from the elements there are, never from the shape alone: a
  // shape of 2^62 elements must get an error, not std::length_error.
  const size_t elements = data.is_array() ? data.size() : 1;
  if (datatype != DataType::kBytes) t.data.reserve(elements * DataTypeSize(datatype));
  if (!data.is_array()) {
    if (n != 1 || data.is_null() || data.is_object())
      return Bad("serve.data_not_list", {{"tensor", name}});
    RETURN_IF_ERROR(AppendElement(t.data, datatype, data, name, 0));
    return t;
  }
  bool nested = !data.empty() && data[0].is_array();
  if (nested) {
    if (shape.empty())
      return Bad("serve.data_nesting", {{"tensor", name}, {"shape", "[]"}, {"dim", "0"}});
    size_t index = 0;
    RETURN_IF_ERROR(AppendNested(t.data, datatype, data, shape, 0, name, index));
    return t;
  }
  if (static_cast<int64_t>(data.size()) != n) {
    return Bad("serve.data_count", {{"tensor", name},
                                    {"shape", ShapeString(shape)},
                                    {"expected", std::to_string(n)},
                                    {"got", std::to_string(data.size())}});
  }
  for (size_t i = 0; i < data.size(); ++i)
    RETURN_IF_ERROR(AppendElement(t.data, datatype, data[i], name, i));
  return t;
}

namespace {

// The request's "parameters": binary_data_output, priority, timeout.
Status ParseRequestParameters(const Json& p, InferRequestMsg& m) {
  if (!p.is_object()) return Bad("serve.bad_request_field", {{"field", "parameters"}});
  if (p.contains("binary_data_output")) {
    if (!p["binary_data_output"].is_boolean())
      return Bad("serve.bad_request_field", {{"field", "parameters.binary_data_output"}});
    m.binary_data_output = p["binary_data_output"].get<bool>();
  }
  if (p.contains("priority")) {
    if (p["priority"].is_number_unsigned()) {
      m.priority = std::to_string(p["priority"].get<uint64_t>());
    } else if (p["priority"].is_string()) {
      m.priority = p["priority"].get<std::string>();
    } else {
      return Bad("serve.bad_request_field", {{"field", "parameters.priority"}});
    }
  }
  if (p.contains("timeout")) {
    if (!p["timeout"].is_number_unsigned())
      return Bad("serve.bad_request_field", {{"field", "parameters.timeout"}});
    m.timeout_us =
        static_cast<int64_t>(std::min<uint64_t>(p["timeout"].get<uint64_t>(), uint64_t{1} << 50));
  }
  return Status::OK();
}

// The request's "outputs": names, each with its own binary_data choice
// (binary_data_output by default), so parameters must be parsed first.
Status ParseRequestedOutputs(const Json& outs, InferRequestMsg& m) {
  if (!outs.is_array()) return Bad("serve.bad_request_field", {{"field", "outputs"}});
  for (size_t i = 0; i < outs.size(); ++i) {
    const Json& o = outs[i];
    if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) {
      return Bad("serve.bad_request_field", {{"field", "outputs[" + std::to_string(i) + "].name"}});
    }
    RequestedOutput r{o["name"].get<std::string>(), m.binary_data_output};
    if (o.contains("parameters") && o["parameters"].is_object() &&
        o["parameters"].contains("binary_data")) {
      if (!o["parameters"]["binary_data"].is_boolean()) {
        return Bad("serve.bad_request_field",
                   {{"field", "outputs[" + std::to_string(i) + "].parameters.binary_data"}});
      }
      r.binary = o["parameters"]["binary_data"].get<bool>();
    }
    m.outputs.push_back(std::move(r));
  }
  return Status::OK();
}

// Splits a binary-extension body at Inference-Header-Content-Length.
Status SplitBinaryBody(std::string_view body, std::string_view header_length,
                       std::string_view& json_part, std::string_view& binary) {
  uint64_t n = 0;
  auto [p, ec] =
      std::from_chars(header_length.data(), header_length.data() + header_length.size(), n);
  if (ec != std::errc() || p != header_length.data() + header_length.size() || n > body.size()) {
    return Bad("serve.bad_header_length",
               {{"value", std::string(header_length)}, {"body", std::to_string(body.size())}});
  }
  json_part = body.substr(0, n);
  binary = body.substr(n);
  return Status::OK();
}

}  // namespace

Result<InferRequestMsg> ParseInferRequest(std::string_view body, std::string_view header_length) {
  // 1. The JSON part and the binary tail (the fast path when there is no tail).
  std::string_view json_part = body, binary;
  bool has_binary = !header_length.empty();
  if (has_binary) {
    RETURN_IF_ERROR(SplitBinaryBody(body, header_length, json_part, binary));
  } else if (auto quick = quick::Parse(body)) {
    return std::move(*quick);
  }
  auto parsed = ParseJsonBody(json_part);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  if (!j.is_object()) return Status::Msg(Code::kInvalidArgument, "json.not_object");
  // 2. id and parameters.
  InferRequestMsg m;
  if (j.contains("id")) {
    if (!j["id"].is_string()) return Bad("serve.bad_request_field", {{"field", "id"}});
    m.id = j["id"].get<std::string>();
  }
  if (j.contains("parameters")) RETURN_IF_ERROR(ParseRequestParameters(j["parameters"], m));
  // 3. Inputs, which consume the binary tail in order; none may be left over.
  if (!j.contains("inputs") || !j["inputs"].is_array() || j["inputs"].empty()) {
    return Bad("serve.bad_request_field", {{"field", "inputs"}});
  }
  for (size_t i = 0; i < j["inputs"].size(); ++i) {
    ASSIGN_OR_RETURN(Tensor t, ParseInput(j["inputs"][i], i, binary, has_binary));
    for (const auto& o : m.inputs) {
      if (o.name == t.name) return Bad("serve.duplicate_input", {{"tensor", t.name}});
    }
    m.inputs.push_back(std::move(t));
  }
  if (!binary.empty())
    return Bad("serve.binary_left_over", {{"bytes", std::to_string(binary.size())}});
  // 4. The outputs asked for.
  if (j.contains("outputs")) RETURN_IF_ERROR(ParseRequestedOutputs(j["outputs"], m));
  return m;
}

void AppendJsonData(std::string& out, const Tensor& t, bool nested) {
  ElementWriter w(t);
  if (nested && !t.shape.empty() && ElementCount(t.shape) == w.count()) {
    int64_t index = 0;
    AppendNestedOut(out, w, t.shape, 0, index);
    return;
  }
  out += '[';
  for (int64_t i = 0; i < w.count(); ++i) {
    if (i) out += ',';
    w.Write(out, i);
  }
  out += ']';
}

EncodedResponse EncodeInferResponse(const std::string& model, int64_t version,
                                    const std::string& id, const std::vector<Tensor>& outputs,
                                    const std::vector<RequestedOutput>& requested,
                                    bool binary_default) {
  std::vector<std::pair<const Tensor*, bool>> chosen;
  if (requested.empty()) {
    for (const auto& t : outputs) chosen.emplace_back(&t, binary_default);
  } else {
    for (const auto& r : requested) {
      for (const auto& t : outputs) {
        if (t.name == r.name) chosen.emplace_back(&t, r.binary);
      }
    }
  }
  EncodedResponse res;
  std::string& out = res.body;
  out += "{\"model_name\":";
  AppendJsonString(out, model);
  out += ",\"model_version\":\"" + std::to_string(version) + "\"";
  if (!id.empty()) {
    out += ",\"id\":";
    AppendJsonString(out, id);
  }
  out += ",\"outputs\":[";
  bool any_binary = false;
  for (size_t i = 0; i < chosen.size(); ++i) {
    const Tensor& t = *chosen[i].first;
    if (i) out += ',';
    out += "{\"name\":";
    AppendJsonString(out, t.name);
    out += ",\"datatype\":\"" + std::string(DataTypeName(t.datatype)) + "\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d) out += (d ? "," : "") + std::to_string(t.shape[d]);
    out += "]";
    if (chosen[i].second) {
      any_binary = true;
      out += ",\"parameters\":{\"binary_data_size\":" + std::to_string(t.data.size()) + "}}";
    } else {
      out += ",\"data\":";
      AppendJsonData(out, t, false);
      out += "}";
    }
  }
  out += "]}";
  if (any_binary) {
    res.header_length = out.size();
    res.content_type = "application/octet-stream";
    for (const auto& [t, binary] : chosen) {
      if (binary) out += t->data;
    }
  }
  return res;
}

namespace {

// The shape of nested JSON, following first elements.
Shape InferShape(const Json& v) {
  Shape s;
  const Json* p = &v;
  while (p->is_array()) {
    s.push_back(static_cast<int64_t>(p->size()));
    if (p->empty()) break;
    p = &(*p)[0];
  }
  return s;
}

DataType GuessType(const Json& v) {
  const Json* p = &v;
  while (p->is_array() && !p->empty()) p = &(*p)[0];
  if (p->is_string() && !NonFinite(p->get<std::string>())) return DataType::kBytes;
  if (p->is_boolean()) return DataType::kBool;
  return DataType::kFp32;
}

Result<Tensor> PredictTensor(const std::string& name, const Json& value, const ModelConfig& c) {
  DataType dt = DataType::kInvalid;
  for (const auto& in : c.inputs) {
    if (in.name == name) dt = in.datatype;
  }
  if (dt == DataType::kInvalid) dt = GuessType(value);
  Shape shape = InferShape(value);
  if (shape.empty()) shape = {1};
  return TensorFromJsonData(name, dt, shape, value.is_array() ? value : Json::array({value}));
}

}  // namespace

Result<std::vector<Tensor>> PredictRequestToTensors(const Json& body, const ModelConfig& c) {
  if (!body.is_object()) return Status::Msg(Code::kInvalidArgument, "json.not_object");
  std::string single = c.inputs.empty() ? "input__0" : c.inputs[0].name;
  std::vector<Tensor> out;
  if (body.contains("instances")) {
    const Json& inst = body["instances"];
    if (!inst.is_array() || inst.empty())
      return Bad("serve.bad_request_field", {{"field", "instances"}});
    if (inst[0].is_object()) {
      // One object per row: gather each named input's rows.
      std::vector<std::string> names;
      for (auto it = inst[0].begin(); it != inst[0].end(); ++it) names.push_back(it.key());
      for (const auto& n : names) {
        Json rows = Json::array();
        for (const auto& r : inst) {
          if (!r.is_object() || !r.contains(n)) return Bad("serve.predict_row", {{"tensor", n}});
          rows.push_back(r[n]);
        }
        ASSIGN_OR_RETURN(Tensor t, PredictTensor(n, rows, c));
        out.push_back(std::move(t));
      }
      return out;
    }
    if (c.inputs.size() > 1)
      return Bad("serve.predict_inputs", {{"count", std::to_string(c.inputs.size())}});
    ASSIGN_OR_RETURN(Tensor t, PredictTensor(single, inst, c));
    out.push_back(std::move(t));
    return out;
  }
  if (body.contains("inputs")) {
    const Json& in = body["inputs"];
    if (in.is_object()) {
      for (auto it = in.begin(); it != in.end(); ++it) {
        ASSIGN_OR_RETURN(Tensor t, PredictTensor(it.key(), *it, c));
        out.push_back(std::move(t));
      }
      return out;
    }
    if (c.inputs.size() > 1)
      return Bad("serve.predict_inputs", {{"count", std::to_string(c.inputs.size())}});
    ASSIGN_OR_RETURN(Tensor t, PredictTensor(single, in, c));
    out.push_back(std::move(t));
    return out;
  }
  return Bad("serve.bad_request_field", {{"field", "instances"}});
}

std::string TensorsToPredictResponse(const std::vector<Tensor>& outputs) {
  std::string out = "{\"predictions\":";
  if (outputs.size() == 1) {
    AppendJsonData(out, outputs[0], true);
    return out + "}";
  }
  // One object per row when every output has the same rows; else one entry per output.
  std::vector<ElementWriter> writers;
  for (const auto& t : outputs) writers.emplace_back(t);
  int64_t rows = outputs.empty() || outputs[0].shape.empty() ? -1 : outputs[0].shape[0];
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& t = outputs[k];
    if (t.shape.empty() || t.shape[0] != rows || writers[k].count() != ElementCount(t.shape))
      rows = -1;
  }
  if (rows < 0) {
    out += '{';
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (k) out += ',';
      AppendJsonString(out, outputs[k].name);
      out += ':';
      AppendJsonData(out, outputs[k], true);
    }
    return out + "}}";
  }
  out += '[';
  for (int64_t r = 0; r < rows; ++r) {
    if (r) out += ',';
    out += '{';
    for (size_t k = 0; k < outputs.size(); ++k) {
      const Tensor& t = outputs[k];
      if (k) out += ',';
      AppendJsonString(out, t.name);
      out += ':';
      Shape row(t.shape.begin() + (t.shape.empty() ? 0 : 1), t.shape.end());
      int64_t per = ElementCount(row);
      int64_t index = r * per;
      if (row.empty()) {
        writers[k].Write(out, index);
      } else {
        AppendNestedOut(out, writers[k], row, 0, index);
      }
    }
    out += '}';
  }
  return out + "]}";
}

}  // namespace lathe::serve
