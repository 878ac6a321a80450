// SPDX-License-Identifier: Apache-2.0
// JSON inference request parsing (simdjson DOM) and response writing (JsonWriter).
//
// NOTE: the parser is given kMaxJsonDepth, so simdjson rejects deeper documents in its
// iterative stage 2 and the recursive walks below (CountLeaves / FillLeaves) never go deeper
// than that. `data` is walked twice: once to count leaves, compared with product(shape) before
// any tensor memory is allocated (a shape of [1e12] with three numbers allocates nothing), then
// to convert. Only the simdjson error-code API is used (`.get(x)`), which never throws.
#include "server/http/infer_json.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "server/http/compression.h"
#include "server/http/json_read.h"
#include "server/json_writer.h"
#include "server/raw_tensor.h"
#include "tensor/shape.h"

namespace kiln {
namespace {

static_assert(kJsonPaddingBytes >= simdjson::SIMDJSON_PADDING);

namespace dom = simdjson::dom;
using ElementType = dom::element_type;

using json_read::AsBool;
using json_read::AsDouble;
using json_read::AsInt64;
using json_read::AsString;
using json_read::AsUint64;
using json_read::JsonTypeName;
std::string Describe(dom::element e) { return json_read::JsonValueForMessage(e); }

// The protocol's parameter values are booleans, numbers and strings: an object, an array or null
// in a `parameters` object (of the request, an input or an output) is INVALID_ARGUMENT naming
// the key. `owner` prefixes the message ("input 'x': ", or empty for the request).
Status CheckParameterValues(dom::object params, std::string_view owner) {
  for (dom::key_value_pair kv : params) {
    const ElementType t = kv.value.type();
    if (t == ElementType::OBJECT || t == ElementType::ARRAY || t == ElementType::NULL_VALUE) {
      return Status::InvalidArgument(
          fmt::format("{}parameter '{}' must be a boolean, a number or a string, got {}", owner,
                      kv.key, JsonTypeName(t)));
    }
  }
  return Status::OK();
}

// Where an element sits, for messages: input name, its datatype and the flat index.
struct ElementSite {
  std::string_view input;
  DataType dtype;
  int64_t index;
};

Status BadElement(const ElementSite& site, dom::element e, std::string_view expected) {
  return Status::InvalidArgument(
      fmt::format("input '{}': data element {} is {}, expected {} for datatype {}", site.input,
                  site.index, Describe(e), expected, DataTypeName(site.dtype)));
}

Status Convert(dom::element e, bool* out, const ElementSite& site) {
  if (e.get_bool().get(*out) != simdjson::SUCCESS) return BadElement(site, e, "true or false");
  return Status::OK();
}

template <typename T>
requires std::is_integral_v<T> Status Convert(dom::element e, T* out, const ElementSite& site) {
  const std::string_view expected = std::is_signed_v<T> ? "an integer" : "a non-negative integer";
  switch (e.type()) {
    case ElementType::INT64: {
      const int64_t v = AsInt64(e);
      if (!std::in_range<T>(v)) break;
      *out = static_cast<T>(v);
      return Status::OK();
    }
    case ElementType::UINT64: {
      const uint64_t v = AsUint64(e);
      if (!std::in_range<T>(v)) break;
      *out = static_cast<T>(v);
      return Status::OK();
    }
    default:
      return BadElement(site, e, expected);
  }
  return Status::InvalidArgument(fmt::format(
      "input '{}': data element {} is {}, out of range for datatype {} [{}, {}]", site.input,
      site.index, Describe(e), DataTypeName(site.dtype),
      static_cast<int64_t>(std::numeric_limits<T>::min()), std::numeric_limits<T>::max()));
}

// JSON number (or one of the strings JsonWriter writes for non-finite values) -> double.
bool ToDouble(dom::element e, double* out) {
  switch (e.type()) {
    case ElementType::INT64:
      *out = static_cast<double>(AsInt64(e));
      return true;
    case ElementType::UINT64:
      *out = static_cast<double>(AsUint64(e));
      return true;
    case ElementType::DOUBLE:
      *out = AsDouble(e);
      return true;
    case ElementType::STRING: {
      const std::string_view s = AsString(e);
      if (s == "NaN") {
        *out = std::numeric_limits<double>::quiet_NaN();
      } else if (s == "Infinity") {
        *out = std::numeric_limits<double>::infinity();
      } else if (s == "-Infinity") {
        *out = -std::numeric_limits<double>::infinity();
      } else {
        return false;
      }
      return true;
    }
    default:
      return false;
  }
}

constexpr std::string_view kExpectedFloat = "a number (or \"NaN\", \"Infinity\", \"-Infinity\")";

Status Convert(dom::element e, double* out, const ElementSite& site) {
  if (!ToDouble(e, out)) return BadElement(site, e, kExpectedFloat);
  return Status::OK();
}

Status Convert(dom::element e, float* out, const ElementSite& site) {
  double d = 0;
  if (!ToDouble(e, &d)) return BadElement(site, e, kExpectedFloat);
  // Converting a double outside float's range is undefined behaviour in C++; round as IEEE
  // does: at or beyond FLT_MAX + half an ulp the result is infinity.
  constexpr double kFloatOverflow = 0x1.ffffffp127;
  if (std::isfinite(d) && std::fabs(d) >= kFloatOverflow) {
    *out = d > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  } else {
    *out = static_cast<float>(d);
  }
  return Status::OK();
}

Status Convert(dom::element e, std::string* out, const ElementSite& site) {
  std::string_view s;
  if (e.get_string().get(s) != simdjson::SUCCESS) return BadElement(site, e, "a string");
  out->assign(s);
  return Status::OK();
}

// Number of non-array leaves of a (possibly nested) array. Depth is bounded by the parser.
int64_t CountLeaves(dom::array array) {
  int64_t n = 0;
  for (dom::element child : array) {
    dom::array sub;
    if (child.get_array().get(sub) == simdjson::SUCCESS) {
      n += CountLeaves(sub);
    } else {
      ++n;
    }
  }
  return n;
}

// REQUIRES: `out` has room for CountLeaves(array) elements from *index on.
template <typename T>
Status FillLeaves(dom::array array, T* out, ElementSite* site) {
  for (dom::element child : array) {
    dom::array sub;
    if (child.get_array().get(sub) == simdjson::SUCCESS) {
      KILN_RETURN_IF_ERROR(FillLeaves(sub, out, site));
    } else {
      KILN_RETURN_IF_ERROR(Convert(child, out + site->index, *site));
      ++site->index;
    }
  }
  return Status::OK();
}

Status FillTensor(dom::array data, std::string_view input, OwnedTensor* tensor) {
  ElementSite site{input, tensor->dtype(), 0};
  switch (tensor->dtype()) {
    case DataType::kBool:
      return FillLeaves(data, tensor->data<bool>(), &site);
    case DataType::kUint8:
      return FillLeaves(data, tensor->data<uint8_t>(), &site);
    case DataType::kUint16:
      return FillLeaves(data, tensor->data<uint16_t>(), &site);
    case DataType::kUint32:
      return FillLeaves(data, tensor->data<uint32_t>(), &site);
    case DataType::kUint64:
      return FillLeaves(data, tensor->data<uint64_t>(), &site);
    case DataType::kInt8:
      return FillLeaves(data, tensor->data<int8_t>(), &site);
    case DataType::kInt16:
      return FillLeaves(data, tensor->data<int16_t>(), &site);
    case DataType::kInt32:
      return FillLeaves(data, tensor->data<int32_t>(), &site);
    case DataType::kInt64:
      return FillLeaves(data, tensor->data<int64_t>(), &site);
    case DataType::kFloat32:
      return FillLeaves(data, tensor->data<float>(), &site);
    case DataType::kFloat64:
      return FillLeaves(data, tensor->data<double>(), &site);
    case DataType::kBytes:
      return FillLeaves(data, tensor->data<std::string>(), &site);
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kInvalid:
      break;
  }
  return Status::Internal(fmt::format("input '{}': no JSON conversion for datatype {}", input,
                                      DataTypeName(tensor->dtype())));
}

Status ParseError(simdjson::error_code error) {
  switch (error) {
    case simdjson::EMPTY:
      return Status::InvalidArgument("request body is empty; expected JSON");
    case simdjson::DEPTH_ERROR:
      return Status::InvalidArgument(
          fmt::format("malformed JSON request body: nesting deeper than {} levels", kMaxJsonDepth));
    case simdjson::MEMALLOC:
    case simdjson::CAPACITY:
      return Status::ResourceExhausted("cannot allocate memory to parse the request body");
    default:
      return Status::InvalidArgument(
          fmt::format("malformed JSON request body: {}", simdjson::error_message(error)));
  }
}

bool HasKey(dom::object obj, std::string_view key) {
  dom::element unused;
  return obj.at_key(key).get(unused) == simdjson::SUCCESS;
}

Result<Shape> ParseShape(dom::element shape_el, std::string_view input) {
  dom::array shape_array;
  if (shape_el.get_array().get(shape_array) != simdjson::SUCCESS) {
    return Status::InvalidArgument(fmt::format("input '{}': 'shape' must be an array, got {}",
                                               input, JsonTypeName(shape_el.type())));
  }
  std::vector<int64_t> dims;
  for (dom::element d : shape_array) {
    int64_t v = 0;
    if (d.type() == ElementType::UINT64) {
      return Status::InvalidArgument(fmt::format("input '{}': shape dim {} is {}, too large", input,
                                                 dims.size(), Describe(d)));
    }
    if (d.type() != ElementType::INT64 || d.get_int64().get(v) != simdjson::SUCCESS || v < 0) {
      return Status::InvalidArgument(
          fmt::format("input '{}': shape dim {} is {}; dims must be non-negative integers", input,
                      dims.size(), Describe(d)));
    }
    dims.push_back(v);
    if (dims.size() > static_cast<size_t>(Shape::kMaxRank)) {
      return Status::InvalidArgument(
          fmt::format("input '{}': shape has more than {} dims", input, Shape::kMaxRank));
    }
  }
  Result<Shape> shape = Shape::Create(dims);
  if (!shape.ok()) {
    return Status::InvalidArgument(
        fmt::format("input '{}': invalid shape: {}", input, shape.status().message()));
  }
  if (shape->NumElements() > kMaxTensorElements) {
    return Status::InvalidArgument(
        fmt::format("input '{}': shape {} has {} elements, more than the limit of {}", input,
                    shape->ToString(), shape->NumElements(), kMaxTensorElements));
  }
  return shape;
}

// The binary section of a request body: what follows the JSON header. Inputs take their bytes
// from it in order.
struct BinarySection {
  std::string_view bytes;
  size_t consumed = 0;
  std::shared_ptr<const void> owner;  // keeps `bytes` alive for borrowing tensors
};

Result<InferInput> ParseInput(dom::element el, size_t position,
                              std::unordered_set<std::string_view>* seen, BinarySection* section) {
  dom::object in;
  if (el.get_object().get(in) != simdjson::SUCCESS) {
    return Status::InvalidArgument(
        fmt::format("inputs[{}] must be an object, got {}", position, JsonTypeName(el.type())));
  }
  std::string_view name;
  if (in.at_key("name").get_string().get(name) != simdjson::SUCCESS) {
    return Status::InvalidArgument(fmt::format("inputs[{}] has no 'name' string", position));
  }
  if (!seen->insert(name).second) {
    return Status::InvalidArgument(fmt::format("input '{}' appears more than once", name));
  }
  std::string_view datatype_name;
  if (in.at_key("datatype").get_string().get(datatype_name) != simdjson::SUCCESS) {
    return Status::InvalidArgument(fmt::format("input '{}' has no 'datatype' string", name));
  }
  const std::optional<DataType> dtype = DataTypeFromName(datatype_name);
  if (!dtype) {
    return Status::InvalidArgument(
        fmt::format("input '{}' has invalid datatype '{}'", name, datatype_name));
  }
  dom::element shape_el;
  if (in.at_key("shape").get(shape_el) != simdjson::SUCCESS) {
    return Status::InvalidArgument(fmt::format("input '{}' has no 'shape'", name));
  }
  KILN_ASSIGN_OR_RETURN(Shape shape, ParseShape(shape_el, name));

  bool binary = false;
  bool shared_memory = false;
  dom::element binary_size_el;
  dom::element params_el;
  if (in.at_key("parameters").get(params_el) == simdjson::SUCCESS) {
    dom::object params;
    if (params_el.get_object().get(params) != simdjson::SUCCESS) {
      return Status::InvalidArgument(
          fmt::format("input '{}': 'parameters' must be an object", name));
    }
    KILN_RETURN_IF_ERROR(CheckParameterValues(params, fmt::format("input '{}': ", name)));
    binary = params.at_key("binary_data_size").get(binary_size_el) == simdjson::SUCCESS;
    shared_memory = HasKey(params, "shared_memory_region");
  }
  dom::element data_el;
  const bool has_data = in.at_key("data").get(data_el) == simdjson::SUCCESS;
  const int sources = int{has_data} + int{binary} + int{shared_memory};
  if (sources > 1) {
    return Status::InvalidArgument(
        fmt::format("input '{}' must set only one of 'data', 'parameters.binary_data_size' and "
                    "'parameters.shared_memory_region'",
                    name));
  }
  if (binary) {
    uint64_t size = 0;
    if ((binary_size_el.type() != ElementType::INT64 &&
         binary_size_el.type() != ElementType::UINT64) ||
        binary_size_el.get_uint64().get(size) != simdjson::SUCCESS) {
      return Status::InvalidArgument(
          fmt::format("input '{}': 'binary_data_size' must be a non-negative integer, got {}", name,
                      Describe(binary_size_el)));
    }
    const size_t remaining = section->bytes.size() - section->consumed;
    if (size > remaining) {
      return Status::InvalidArgument(fmt::format(
          "unexpected size for input '{}': binary_data_size is {} bytes but only {} bytes of "
          "binary data remain after the JSON header",
          name, size, remaining));
    }
    const std::string_view data = section->bytes.substr(section->consumed, size);
    section->consumed += size;
    KILN_ASSIGN_OR_RETURN(OwnedTensor tensor,
                          DecodeRawTensor(name, *dtype, shape, data, section->owner));
    return InferInput{std::string(name), std::move(tensor)};
  }
  if (shared_memory) {
    return Status::Unimplemented(
        fmt::format("input '{}': shared memory inputs are not supported", name));
  }
  if (!has_data) return Status::InvalidArgument(fmt::format("input '{}' has no 'data'", name));
  if (*dtype == DataType::kFloat16 || *dtype == DataType::kBFloat16) {
    return Status::InvalidArgument(fmt::format(
        "input '{}': datatype {} cannot be sent as JSON 'data'; it requires binary tensor data",
        name, datatype_name));
  }
  dom::array data;
  if (data_el.get_array().get(data) != simdjson::SUCCESS) {
    return Status::InvalidArgument(fmt::format("input '{}': 'data' must be an array, got {}", name,
                                               JsonTypeName(data_el.type())));
  }
  const int64_t count = CountLeaves(data);
  if (count != shape.NumElements()) {
    return Status::InvalidArgument(
        fmt::format("input '{}': 'data' has {} elements but shape {} needs {}", name, count,
                    shape.ToString(), shape.NumElements()));
  }
  KILN_ASSIGN_OR_RETURN(OwnedTensor tensor, OwnedTensor::Allocate(*dtype, shape));
  KILN_RETURN_IF_ERROR(FillTensor(data, name, &tensor));
  return InferInput{std::string(name), std::move(tensor)};
}

Result<OutputEncoding> ParseOutput(dom::element el, size_t position) {
  dom::object out;
  if (el.get_object().get(out) != simdjson::SUCCESS) {
    return Status::InvalidArgument(
        fmt::format("outputs[{}] must be an object, got {}", position, JsonTypeName(el.type())));
  }
  std::string_view name;
  if (out.at_key("name").get_string().get(name) != simdjson::SUCCESS) {
    return Status::InvalidArgument(fmt::format("outputs[{}] has no 'name' string", position));
  }
  dom::element params_el;
  if (out.at_key("parameters").get(params_el) == simdjson::SUCCESS) {
    dom::object params;
    if (params_el.get_object().get(params) != simdjson::SUCCESS) {
      return Status::InvalidArgument(
          fmt::format("output '{}': 'parameters' must be an object", name));
    }
    KILN_RETURN_IF_ERROR(CheckParameterValues(params, fmt::format("output '{}': ", name)));
    if (HasKey(params, "shared_memory_region")) {
      return Status::Unimplemented(
          fmt::format("output '{}': shared memory outputs are not supported", name));
    }
    OutputEncoding encoding{std::string(name), std::nullopt, 0};
    dom::element v;
    if (params.at_key("binary_data").get(v) == simdjson::SUCCESS) {
      bool binary = false;
      if (v.get_bool().get(binary) != simdjson::SUCCESS) {
        return Status::InvalidArgument(
            fmt::format("output '{}': 'binary_data' must be a boolean, got {}", name, Describe(v)));
      }
      encoding.binary_data = binary;
    }
    if (params.at_key("classification").get(v) == simdjson::SUCCESS) {
      int64_t k = 0;
      if (v.type() != ElementType::INT64 || v.get_int64().get(k) != simdjson::SUCCESS || k < 1) {
        return Status::InvalidArgument(fmt::format(
            "output '{}': 'classification' must be a positive integer (the number of classes), "
            "got {}",
            name, Describe(v)));
      }
      encoding.class_count = k;
    }
    return encoding;
  }
  return OutputEncoding{std::string(name), std::nullopt, 0};
}

// A scheduling parameter: a JSON unsigned integer that fits uint64.
Result<uint64_t> ParseUint64Parameter(std::string_view key, dom::element value,
                                      std::string_view meaning) {
  uint64_t v = 0;
  if ((value.type() == ElementType::INT64 || value.type() == ElementType::UINT64) &&
      value.get_uint64().get(v) == simdjson::SUCCESS) {
    return v;
  }
  const std::string got = value.type() == ElementType::INT64
                              ? fmt::format("{}", AsInt64(value))
                              : std::string(JsonTypeName(value.type()));
  return Status::InvalidArgument(fmt::format(
      "request parameter '{}' ({}) must be an unsigned integer, got {}", key, meaning, got));
}

Status SequenceUnsupported(std::string_view key) {
  return Status::InvalidArgument(fmt::format(
      "sequence batching is not supported: request parameter '{}' cannot be used (kiln serves "
      "each request on its own)",
      key));
}

Status ParseRequestParameters(dom::element el, InferRequest* request, ResponseEncoding* encoding) {
  dom::object params;
  if (el.get_object().get(params) != simdjson::SUCCESS) {
    return Status::InvalidArgument("request 'parameters' must be an object");
  }
  KILN_RETURN_IF_ERROR(CheckParameterValues(params, "request "));
  for (dom::key_value_pair kv : params) {
    if (kv.key.starts_with("triton_")) {
      return Status::InvalidArgument(
          fmt::format("request parameter '{}' uses the reserved prefix 'triton_'", kv.key));
    }
    if (kv.key == "priority") {
      KILN_ASSIGN_OR_RETURN(request->priority,
                            ParseUint64Parameter(kv.key, kv.value,
                                                 "priority level; 1 is the highest, 0 the "
                                                 "model's default"));
    } else if (kv.key == "timeout") {
      KILN_ASSIGN_OR_RETURN(
          request->timeout_us,
          ParseUint64Parameter(kv.key, kv.value, "queue timeout in microseconds"));
    } else if (kv.key == "precision" || kv.key == "service_class") {
      std::string_view value;
      if (kv.value.get_string().get(value) != simdjson::SUCCESS) {
        return Status::InvalidArgument(fmt::format(
            "request parameter '{}' must be a string, got {}", kv.key, Describe(kv.value)));
      }
      KILN_RETURN_IF_ERROR(SetRoutingParameter(kv.key, value, request));
    } else if (kv.key == "binary_data_output") {
      if (kv.value.get_bool().get(encoding->binary_data_output) != simdjson::SUCCESS) {
        return Status::InvalidArgument(
            fmt::format("request parameter 'binary_data_output' must be a boolean, got {}",
                        Describe(kv.value)));
      }
    } else if (kv.key == "sequence_id") {
      // 0 and "" mean "not part of a sequence" and are accepted.
      const bool none = (kv.value.type() == ElementType::INT64 && AsInt64(kv.value) == 0) ||
                        (kv.value.type() == ElementType::STRING && AsString(kv.value).empty());
      if (!none) return SequenceUnsupported(kv.key);
    } else if (kv.key == "sequence_start" || kv.key == "sequence_end") {
      bool flag = true;
      if (kv.value.get_bool().get(flag) != simdjson::SUCCESS || flag) {
        return SequenceUnsupported(kv.key);
      }
    }
  }
  return Status::OK();
}

template <typename T, typename Write>
void WriteElements(const Tensor& t, JsonWriter* w, Write write) {
  const T* p = t.data<const T>();
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) write(w, p[i]);
}

Status WriteOutputData(const InferOutput& output, JsonWriter* w) {
  const Tensor& t = output.tensor.view();
  auto as_int = [](JsonWriter* jw, auto v) { jw->Int(static_cast<int64_t>(v)); };
  switch (t.dtype()) {
    case DataType::kBool:
      WriteElements<bool>(t, w, [](JsonWriter* jw, bool v) { jw->Bool(v); });
      return Status::OK();
    case DataType::kUint8:
      WriteElements<uint8_t>(t, w, as_int);
      return Status::OK();
    case DataType::kUint16:
      WriteElements<uint16_t>(t, w, as_int);
      return Status::OK();
    case DataType::kUint32:
      WriteElements<uint32_t>(t, w, as_int);
      return Status::OK();
    case DataType::kUint64:
      WriteElements<uint64_t>(t, w, [](JsonWriter* jw, uint64_t v) { jw->Uint(v); });
      return Status::OK();
    case DataType::kInt8:
      WriteElements<int8_t>(t, w, as_int);
      return Status::OK();
    case DataType::kInt16:
      WriteElements<int16_t>(t, w, as_int);
      return Status::OK();
    case DataType::kInt32:
      WriteElements<int32_t>(t, w, as_int);
      return Status::OK();
    case DataType::kInt64:
      WriteElements<int64_t>(t, w, as_int);
      return Status::OK();
    case DataType::kFloat32:
      WriteElements<float>(t, w, [](JsonWriter* jw, float v) { jw->Float(v); });
      return Status::OK();
    case DataType::kFloat64:
      WriteElements<double>(t, w, [](JsonWriter* jw, double v) { jw->Double(v); });
      return Status::OK();
    case DataType::kBytes:
      WriteElements<std::string>(t, w, [](JsonWriter* jw, const std::string& v) { jw->String(v); });
      return Status::OK();
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kInvalid:
      break;
  }
  return Status::Internal(fmt::format("output '{}': no JSON form for datatype {}", output.name,
                                      DataTypeName(t.dtype())));
}

// Parses body[0, json_bytes) as the JSON header and the rest as the binary section.
Result<ParsedInferRequest> ParseBody(const std::string& body, size_t json_bytes,
                                     std::shared_ptr<const void> owner) {
  // One parser per thread, kept between requests: its buffers (several bytes per byte of JSON)
  // are allocated, and their pages faulted in, once rather than for every request. A body
  // larger than kKeptParserBytes gets a parser of its own, freed after it, so that one huge
  // request does not keep its buffers alive on the thread.
  constexpr size_t kKeptParserBytes = size_t{16} << 20;
  thread_local dom::parser kept_parser;
  dom::parser one_off;
  dom::parser& parser = json_bytes <= kKeptParserBytes ? kept_parser : one_off;
  const size_t capacity = std::max<size_t>(json_bytes, 1);
  if ((parser.capacity() < capacity || parser.max_depth() != kMaxJsonDepth) &&
      parser.allocate(std::max(capacity, std::min(kKeptParserBytes, capacity * 2)),
                      kMaxJsonDepth) != simdjson::SUCCESS) {
    return Status::ResourceExhausted("cannot allocate memory to parse the request body");
  }
  // In place when the allocation has the padding simdjson reads past the end (its content
  // does not matter); otherwise simdjson copies the JSON.
  const bool copy = body.capacity() - json_bytes < simdjson::SIMDJSON_PADDING;
  dom::element root;
  if (const auto error = parser.parse(body.data(), json_bytes, copy).get(root);
      error != simdjson::SUCCESS) {
    return ParseError(error);
  }
  dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    return Status::InvalidArgument(
        fmt::format("request body must be a JSON object, got {}", JsonTypeName(root.type())));
  }
  ParsedInferRequest parsed;
  parsed.request = std::make_unique<InferRequest>();
  InferRequest* request = parsed.request.get();

  dom::element el;
  if (obj.at_key("id").get(el) == simdjson::SUCCESS) {
    std::string_view id;
    if (el.get_string().get(id) != simdjson::SUCCESS) {
      return Status::InvalidArgument(
          fmt::format("request 'id' must be a string, got {}", JsonTypeName(el.type())));
    }
    request->id = std::string(id);
  }
  if (obj.at_key("parameters").get(el) == simdjson::SUCCESS) {
    KILN_RETURN_IF_ERROR(ParseRequestParameters(el, request, &parsed.encoding));
  }

  dom::array inputs;
  if (obj.at_key("inputs").get(el) != simdjson::SUCCESS) {
    return Status::InvalidArgument("request has no 'inputs'");
  }
  if (el.get_array().get(inputs) != simdjson::SUCCESS) {
    return Status::InvalidArgument(
        fmt::format("request 'inputs' must be an array, got {}", JsonTypeName(el.type())));
  }
  BinarySection section{std::string_view(body).substr(json_bytes), 0, std::move(owner)};
  std::unordered_set<std::string_view> seen;
  size_t position = 0;
  for (dom::element input_el : inputs) {
    KILN_ASSIGN_OR_RETURN(InferInput input, ParseInput(input_el, position, &seen, &section));
    request->inputs.push_back(std::move(input));
    ++position;
  }
  if (section.consumed != section.bytes.size()) {
    return Status::InvalidArgument(fmt::format(
        "unexpected additional input data: the binary section has {} bytes, the inputs' "
        "binary_data_size account for {}",
        section.bytes.size(), section.consumed));
  }

  if (obj.at_key("outputs").get(el) == simdjson::SUCCESS) {
    dom::array outputs;
    if (el.get_array().get(outputs) != simdjson::SUCCESS) {
      return Status::InvalidArgument(
          fmt::format("request 'outputs' must be an array, got {}", JsonTypeName(el.type())));
    }
    position = 0;
    for (dom::element output_el : outputs) {
      KILN_ASSIGN_OR_RETURN(OutputEncoding output, ParseOutput(output_el, position));
      request->outputs.push_back(RequestedOutput{output.name});
      parsed.encoding.outputs.push_back(std::move(output));
      ++position;
    }
  }
  return parsed;
}

}  // namespace

bool ResponseEncoding::IsBinary(std::string_view output) const {
  for (const OutputEncoding& o : outputs) {
    if (o.name == output) return o.binary_data.value_or(binary_data_output);
  }
  return binary_data_output;
}

int64_t ResponseEncoding::ClassCount(std::string_view output) const {
  for (const OutputEncoding& o : outputs) {
    if (o.name == output) return o.class_count;
  }
  return 0;
}

Result<ParsedInferRequest> ParseInferRequest(std::shared_ptr<const std::string> body,
                                             size_t json_bytes) {
  KILN_CHECK(body != nullptr && json_bytes <= body->size(), "bad ParseInferRequest arguments");
  const std::string& text = *body;
  return ParseBody(text, json_bytes, std::move(body));
}

Result<ParsedInferRequest> ParseRawBinaryInferRequest(std::shared_ptr<const std::string> body,
                                                      const ModelSignature& signature) {
  KILN_CHECK(body != nullptr, "null body");
  if (signature.inputs.size() != 1) {
    return Status::InvalidArgument(fmt::format(
        "raw binary request (Inference-Header-Content-Length 0) for model '{}', which has {} "
        "inputs: a raw body can only carry the data of a model with exactly one input; send a "
        "JSON header describing the inputs",
        signature.name, signature.inputs.size()));
  }
  const TensorSpec& spec = signature.inputs[0];
  const std::string_view data(*body);
  // Batch 1 for a batching model, then the configured dims.
  std::vector<int64_t> dims;
  if (signature.max_batch_size > 0) dims.push_back(1);
  dims.insert(dims.end(), spec.dims.begin(), spec.dims.end());
  const auto variable = std::count(dims.begin(), dims.end(), int64_t{-1});
  const auto where = [&] {
    return fmt::format("raw binary request for input '{}' of model '{}' (shape {})", spec.name,
                       signature.name, fmt::join(spec.dims, ","));
  };
  std::string_view payload = data;
  std::shared_ptr<const void> owner = std::move(body);  // keeps `data` valid until replaced
  if (spec.dtype == DataType::kBytes) {
    // The body is the one element of a BYTES tensor of shape [1]: framed with its length.
    const bool one = !dims.empty() && std::all_of(dims.begin(), dims.end(),
                                                  [](int64_t d) { return d == 1 || d == -1; });
    if (!one) {
      return Status::InvalidArgument(
          fmt::format("{}: a BYTES input must have shape [1] to be sent raw", where()));
    }
    if (data.size() > std::numeric_limits<uint32_t>::max()) {
      return Status::InvalidArgument(fmt::format("{}: body too large", where()));
    }
    for (int64_t& d : dims) d = 1;
    auto framed = std::make_shared<std::string>(4 + data.size(), '\0');
    const uint32_t len = static_cast<uint32_t>(data.size());
    for (size_t i = 0; i < 4; ++i) (*framed)[i] = static_cast<char>(len >> (8 * i));
    std::memcpy(framed->data() + 4, data.data(), data.size());
    payload = *framed;
    owner = framed;
  } else if (variable > 1) {
    return Status::InvalidArgument(fmt::format(
        "{}: more than one variable dimension, so the shape cannot be deduced from the body "
        "size; send a JSON header",
        where()));
  } else {
    size_t fixed = DataTypeSize(spec.dtype);
    for (int64_t d : dims) {
      if (d >= 0) fixed *= static_cast<size_t>(d);
    }
    if (variable == 1) {
      if (fixed == 0 ? !data.empty() : data.size() % fixed != 0) {
        return Status::InvalidArgument(
            fmt::format("{}: a body of {} bytes is not a whole number of {}-byte rows", where(),
                        data.size(), fixed));
      }
      const int64_t deduced = fixed == 0 ? 0 : static_cast<int64_t>(data.size() / fixed);
      std::replace(dims.begin(), dims.end(), int64_t{-1}, deduced);
    } else if (data.size() != fixed) {
      return Status::InvalidArgument(
          fmt::format("{}: expected {} bytes, got {}", where(), fixed, data.size()));
    }
  }
  Result<Shape> shape = Shape::Create(dims);
  if (!shape.ok()) {
    return Status::InvalidArgument(fmt::format("{}: {}", where(), shape.status().message()));
  }
  KILN_ASSIGN_OR_RETURN(OwnedTensor t,
                        DecodeRawTensor(spec.name, spec.dtype, *shape, payload, owner));
  ParsedInferRequest parsed;
  parsed.request = std::make_unique<InferRequest>();
  parsed.request->inputs.push_back({spec.name, std::move(t)});
  parsed.encoding.binary_data_output = true;  // every output in binary
  return parsed;
}

Result<ParsedInferRequest> ParseInferHttpBody(std::string body, std::string_view content_encoding,
                                              std::string_view inference_header_length,
                                              size_t max_request_bytes,
                                              const ModelSignature& signature) {
  const std::optional<ContentCoding> coding = ParseContentEncoding(content_encoding);
  if (!coding) {
    return Status::Unimplemented(fmt::format(
        "unsupported Content-Encoding '{}'; supported: gzip, deflate, identity", content_encoding));
  }
  // The body moves into shared ownership: tensors of binary inputs borrow it, and it is freed
  // with the last of them.
  std::shared_ptr<std::string> owned;
  if (*coding == ContentCoding::kIdentity) {
    owned = std::make_shared<std::string>(std::move(body));
  } else {
    KILN_ASSIGN_OR_RETURN(std::string inflated,
                          Decompress(body, *coding, max_request_bytes, kJsonPaddingBytes));
    owned = std::make_shared<std::string>(std::move(inflated));
  }
  size_t json_bytes = owned->size();
  if (!inference_header_length.empty()) {
    const std::string_view h = inference_header_length;
    uint64_t n = 0;
    const auto res = std::from_chars(h.data(), h.data() + h.size(), n);
    if (res.ec != std::errc() || res.ptr != h.data() + h.size() || n > owned->size()) {
      return Status::InvalidArgument(
          fmt::format("invalid Inference-Header-Content-Length '{}' for a{} body of {} bytes", h,
                      *coding == ContentCoding::kIdentity ? "" : " decompressed", owned->size()));
    }
    if (n == 0) return ParseRawBinaryInferRequest(std::move(owned), signature);
    json_bytes = n;
  }
  return ParseInferRequest(std::move(owned), json_bytes);
}

Result<std::unique_ptr<InferRequest>> ParseInferRequestJson(const std::string& body) {
  // No binary section: nothing can borrow the body, so no owner is needed.
  KILN_ASSIGN_OR_RETURN(ParsedInferRequest parsed, ParseBody(body, body.size(), nullptr));
  return std::move(parsed.request);
}

Status EncodeInferResponse(const InferResponse& response, const ResponseEncoding& encoding,
                           EncodedInferResponse* out) {
  std::string& body = out->body;
  body.clear();
  out->binary = false;
  // Binary outputs first decided and checked, so that the JSON can name their sizes.
  std::vector<size_t> binary_sizes(response.outputs.size(), 0);
  std::vector<bool> binary(response.outputs.size(), false);
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    const InferOutput& output = response.outputs[i];
    const Tensor& t = output.tensor.view();
    if (!t.valid() || (t.raw_data() == nullptr && t.num_elements() > 0)) {
      return Status::Internal(fmt::format("output '{}' has no tensor", output.name));
    }
    if (!t.device().is_cpu() || !t.is_contiguous()) {
      return Status::Internal(fmt::format("output '{}' is not a contiguous host tensor ({})",
                                          output.name, t.device().ToString()));
    }
    binary[i] = encoding.IsBinary(output.name);
    if (binary[i]) {
      binary_sizes[i] = RawTensorBytes(t);
      out->binary = true;
    } else if (t.dtype() == DataType::kFloat16 || t.dtype() == DataType::kBFloat16) {
      return Status::InvalidArgument(fmt::format(
          "output '{}' has datatype {}, which cannot be returned as JSON; request it with "
          "binary tensor data (output parameter 'binary_data': true)",
          output.name, DataTypeName(t.dtype())));
    }
  }
  {
    JsonWriter w(&body);
    w.BeginObject();
    if (!response.id.empty()) w.KeyString("id", response.id);
    w.KeyString("model_name", response.model_name);
    w.KeyString("model_version", std::to_string(response.model_version));
    w.Key("outputs");
    w.BeginArray();
    for (size_t i = 0; i < response.outputs.size(); ++i) {
      const InferOutput& output = response.outputs[i];
      const Tensor& t = output.tensor.view();
      w.BeginObject();
      w.KeyString("name", output.name);
      w.KeyString("datatype", DataTypeName(t.dtype()));
      w.Key("shape");
      w.BeginArray();
      for (int64_t d : t.shape().dims()) w.Int(d);
      w.EndArray();
      if (binary[i]) {
        w.Key("parameters");
        w.BeginObject();
        w.Key("binary_data_size");
        w.Uint(binary_sizes[i]);
        w.EndObject();
      } else {
        w.Key("data");
        w.BeginArray();
        KILN_RETURN_IF_ERROR(WriteOutputData(output, &w));
        w.EndArray();
      }
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  out->json_bytes = body.size();
  if (!out->binary) return Status::OK();
  size_t total = body.size();
  for (size_t n : binary_sizes) total += n;
  body.reserve(total);
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    if (binary[i]) KILN_RETURN_IF_ERROR(AppendRawTensor(response.outputs[i].tensor.view(), &body));
  }
  return Status::OK();
}

Status AppendInferResponseJson(const InferResponse& response, std::string* out) {
  EncodedInferResponse encoded;
  Status s = EncodeInferResponse(response, ResponseEncoding{}, &encoded);
  out->append(encoded.body);
  return s;
}

}  // namespace kiln
