// SPDX-License-Identifier: Apache-2.0
// JSON inference request parsing (every datatype, every bad input) and response writing.
#include "server/http/infer_json.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

namespace kiln {
namespace {

Result<std::unique_ptr<InferRequest>> Parse(const std::string& body) {
  return ParseInferRequestJson(body);
}

std::string OneInput(const std::string& datatype, const std::string& shape,
                     const std::string& data) {
  return R"({"inputs":[{"name":"x","datatype":")" + datatype + R"(","shape":)" + shape +
         R"(,"data":)" + data + "}]}";
}

// Expects `body` to fail with `code` and a message containing every one of `parts`.
void ExpectError(const std::string& body, StatusCode code,
                 std::initializer_list<std::string_view> parts) {
  SCOPED_TRACE(body.size() > 300 ? body.substr(0, 300) + "..." : body);
  auto r = Parse(body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  for (std::string_view part : parts) {
    EXPECT_NE(r.status().message().find(part), std::string::npos)
        << "message '" << r.status().message() << "' lacks '" << part << "'";
  }
}

void ExpectInvalid(const std::string& body, std::initializer_list<std::string_view> parts) {
  ExpectError(body, StatusCode::kInvalidArgument, parts);
}

TEST(InferJsonParseTest, FullRequest) {
  const std::string body = R"({
    "id": "req-7", "model_name": "ignored", "unknown_key": {"deep": [1, 2]},
    "parameters": {"priority": 1, "binary_data_output": false, "custom": "x"},
    "inputs": [
      {"name": "INPUT0", "datatype": "FP32", "shape": [1, 3], "data": [1, 2.5, -3e2]},
      {"name": "INPUT1", "datatype": "INT64", "shape": [3], "data": [[1], [2], [3]],
       "parameters": {}}
    ],
    "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": false}}, {"name": "OUTPUT1"}]
  })";
  auto r = Parse(body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const InferRequest& req = **r;
  EXPECT_EQ(req.id, "req-7");
  ASSERT_EQ(req.inputs.size(), 2u);
  EXPECT_EQ(req.inputs[0].name, "INPUT0");
  EXPECT_EQ(req.inputs[0].tensor.dtype(), DataType::kFloat32);
  EXPECT_EQ(req.inputs[0].tensor.shape(), (Shape{1, 3}));
  const float* f = req.inputs[0].tensor.data<float>();
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], 2.5f);
  EXPECT_EQ(f[2], -300.0f);
  EXPECT_EQ(req.inputs[1].tensor.dtype(), DataType::kInt64);
  const int64_t* i = req.inputs[1].tensor.data<int64_t>();
  EXPECT_EQ(i[0], 1);
  EXPECT_EQ(i[2], 3);
  ASSERT_EQ(req.outputs.size(), 2u);
  EXPECT_EQ(req.outputs[0].name, "OUTPUT0");
  EXPECT_EQ(req.outputs[1].name, "OUTPUT1");
  EXPECT_EQ(req.priority, 1u);
  EXPECT_EQ(req.timeout_us, 0u);
}

TEST(InferJsonParseTest, SchedulingParameters) {
  const auto parse = [](const std::string& params) {
    return Parse(R"({"inputs":[],"parameters":)" + params + "}");
  };
  auto r = parse(R"({"priority": 3, "timeout": 2500})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->priority, 3u);
  EXPECT_EQ((*r)->timeout_us, 2500u);
  r = parse(R"({"priority": 18446744073709551615, "timeout": 0})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->priority, UINT64_MAX);
  r = parse(R"({"custom": -1})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->priority, 0u);
  EXPECT_EQ((*r)->timeout_us, 0u);
}

TEST(InferJsonParseTest, SchedulingParameterErrors) {
  const auto body = [](const std::string& params) {
    return R"({"inputs":[],"parameters":)" + params + "}";
  };
  ExpectInvalid(body(R"({"priority": "1"})"),
                {"request parameter 'priority' (priority level; 1 is the highest, 0 the model's "
                 "default) must be an unsigned integer, got a string"});
  ExpectInvalid(body(R"({"priority": -2})"), {"'priority'", "must be an unsigned integer, got -2"});
  ExpectInvalid(body(R"({"priority": 1.5})"), {"'priority'", "got a number"});
  ExpectInvalid(body(R"({"priority": true})"), {"'priority'", "got a boolean"});
  ExpectInvalid(body(R"({"priority": null})"), {"'priority'", "got null"});
  ExpectInvalid(body(R"({"timeout": 1e3})"),
                {"request parameter 'timeout' (queue timeout in microseconds) must be an "
                 "unsigned integer, got a number"});
  ExpectInvalid(body(R"({"timeout": [100]})"), {"'timeout'", "got an array"});
  // Beyond uint64: the JSON parser itself refuses the number (still a 400).
  ExpectInvalid(body(R"({"timeout": 18446744073709551616})"), {"parsing a number"});
}

TEST(InferJsonParseTest, MinimalRequestHasNoIdAndNoOutputs) {
  auto r = Parse(OneInput("FP32", "[1]", "[0]"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE((*r)->id.empty());
  EXPECT_TRUE((*r)->outputs.empty());
}

TEST(InferJsonParseTest, Bool) {
  auto r = Parse(OneInput("BOOL", "[2,2]", "[[true,false],[false,true]]"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const bool* b = (*r)->inputs[0].tensor.data<bool>();
  EXPECT_TRUE(b[0]);
  EXPECT_FALSE(b[1]);
  EXPECT_FALSE(b[2]);
  EXPECT_TRUE(b[3]);
  ExpectInvalid(OneInput("BOOL", "[1]", "[1]"), {"'x'", "element 0", "true or false", "BOOL"});
  ExpectInvalid(OneInput("BOOL", "[1]", "[\"true\"]"), {"'x'", "BOOL"});
  ExpectInvalid(OneInput("BOOL", "[1]", "[null]"), {"'x'", "null"});
}

template <typename T>
void CheckIntegerType(const std::string& name) {
  SCOPED_TRACE(name);
  const auto lo = static_cast<int64_t>(std::numeric_limits<T>::min());
  const std::string hi = std::to_string(std::numeric_limits<T>::max());
  auto r = Parse(OneInput(name, "[3]", "[" + std::to_string(lo) + ",0," + hi + "]"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const T* p = (*r)->inputs[0].tensor.data<T>();
  EXPECT_EQ(p[0], std::numeric_limits<T>::min());
  EXPECT_EQ(p[1], T{0});
  EXPECT_EQ(p[2], std::numeric_limits<T>::max());
  // One beyond each end.
  if constexpr (sizeof(T) < 8) {
    ExpectInvalid(OneInput(name, "[1]", "[" + std::to_string(lo - 1) + "]"),
                  {"'x'", "out of range", name});
    ExpectInvalid(
        OneInput(
            name, "[1]",
            "[" + std::to_string(static_cast<int64_t>(std::numeric_limits<T>::max()) + 1) + "]"),
        {"'x'", "out of range", name});
  } else if constexpr (std::is_signed_v<T>) {
    ExpectInvalid(OneInput(name, "[1]", "[9223372036854775808]"), {"'x'", "out of range", name});
  } else {
    ExpectInvalid(OneInput(name, "[1]", "[-1]"), {"'x'", "out of range", name});
  }
  // Fractions and floating-point literals are not integers.
  ExpectInvalid(OneInput(name, "[2]", "[1, 1.5]"), {"'x'", "element 1", "1.5", "integer"});
  ExpectInvalid(OneInput(name, "[1]", "[1.0]"), {"'x'", "element 0", "integer"});
  ExpectInvalid(OneInput(name, "[1]", "[1e2]"), {"'x'", "integer"});
  ExpectInvalid(OneInput(name, "[1]", "[\"1\"]"), {"'x'", "integer"});
  ExpectInvalid(OneInput(name, "[1]", "[true]"), {"'x'", "integer"});
}

TEST(InferJsonParseTest, Integers) {
  CheckIntegerType<uint8_t>("UINT8");
  CheckIntegerType<uint16_t>("UINT16");
  CheckIntegerType<uint32_t>("UINT32");
  CheckIntegerType<uint64_t>("UINT64");
  CheckIntegerType<int8_t>("INT8");
  CheckIntegerType<int16_t>("INT16");
  CheckIntegerType<int32_t>("INT32");
  CheckIntegerType<int64_t>("INT64");
  ExpectInvalid(OneInput("UINT8", "[1]", "[-1]"), {"'x'", "-1", "out of range", "UINT8"});
  ExpectInvalid(OneInput("UINT8", "[2]", "[0,256]"), {"'x'", "element 1", "256", "UINT8"});
}

TEST(InferJsonParseTest, Floats) {
  auto r = Parse(OneInput(
      "FP32", "[7]", R"([0.1, -2, 18446744073709551615, 1e300, "NaN", "Infinity", "-Infinity"])"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const float* f = (*r)->inputs[0].tensor.data<float>();
  EXPECT_EQ(f[0], 0.1f);
  EXPECT_EQ(f[1], -2.0f);
  EXPECT_EQ(f[2], 18446744073709551615.0f);
  EXPECT_TRUE(std::isinf(f[3]) && f[3] > 0);  // beyond float range
  EXPECT_TRUE(std::isnan(f[4]));
  EXPECT_TRUE(std::isinf(f[5]) && f[5] > 0);
  EXPECT_TRUE(std::isinf(f[6]) && f[6] < 0);

  auto d = Parse(OneInput("FP64", "[3]", "[0.1, 1e300, -5]"));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const double* p = (*d)->inputs[0].tensor.data<double>();
  EXPECT_EQ(p[0], 0.1);
  EXPECT_EQ(p[1], 1e300);
  EXPECT_EQ(p[2], -5.0);

  auto neg = Parse(OneInput("FP32", "[1]", "[-1e300]"));
  ASSERT_TRUE(neg.ok());
  EXPECT_TRUE(std::isinf((*neg)->inputs[0].tensor.data<float>()[0]));

  // simdjson rejects integer literals beyond uint64 and numbers beyond double as malformed
  // numbers (clients write large floats with an exponent: 1e+23).
  ExpectInvalid(OneInput("FP64", "[1]", "[99999999999999999999999]"), {"number"});
  ExpectInvalid(OneInput("INT64", "[1]", "[99999999999999999999999]"), {"number"});
  ExpectInvalid(OneInput("FP32", "[1]", "[1e400]"), {"number"});
  auto big = Parse(OneInput("FP64", "[1]", "[1e+23]"));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ((*big)->inputs[0].tensor.data<double>()[0], 1e23);

  ExpectInvalid(OneInput("FP32", "[1]", "[\"1.5\"]"), {"'x'", "number", "FP32"});
  ExpectInvalid(OneInput("FP64", "[1]", "[\"nan\"]"), {"'x'", "number", "FP64"});
  ExpectInvalid(OneInput("FP32", "[2]", "[1, true]"), {"'x'", "element 1", "true"});
  ExpectInvalid(OneInput("FP32", "[2]", "[1, {}]"), {"'x'", "element 1", "an object"});
  ExpectInvalid(OneInput("FP32", "[1]", "[null]"), {"'x'", "null"});
}

TEST(InferJsonParseTest, Bytes) {
  auto r = Parse(OneInput("BYTES", "[3]", R"(["hello", "", "caf\u00e9 \"q\" \n\u0000"])"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string* s = (*r)->inputs[0].tensor.data<std::string>();
  EXPECT_EQ(s[0], "hello");
  EXPECT_EQ(s[1], "");
  EXPECT_EQ(s[2], std::string("caf\xC3\xA9 \"q\" \n\0", 12));
  ExpectInvalid(OneInput("BYTES", "[1]", "[5]"), {"'x'", "string", "BYTES"});
}

TEST(InferJsonParseTest, HalfPrecisionNeedsBinary) {
  ExpectInvalid(OneInput("FP16", "[1]", "[1.0]"), {"'x'", "FP16", "binary"});
  ExpectInvalid(OneInput("BF16", "[1]", "[1.0]"), {"'x'", "BF16", "binary"});
}

TEST(InferJsonParseTest, NestingIsFlattenedRowMajor) {
  auto r = Parse(OneInput("INT32", "[2,3]", "[[1,2,3],[4,[5,[6]]]]"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const int32_t* p = (*r)->inputs[0].tensor.data<int32_t>();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(p[i], i + 1);
}

TEST(InferJsonParseTest, ScalarAndEmptyShapes) {
  auto scalar = Parse(OneInput("INT32", "[]", "[42]"));
  ASSERT_TRUE(scalar.ok()) << scalar.status().ToString();
  EXPECT_EQ((*scalar)->inputs[0].tensor.shape().rank(), 0);
  EXPECT_EQ((*scalar)->inputs[0].tensor.data<int32_t>()[0], 42);
  auto empty = Parse(OneInput("FP32", "[0,16]", "[]"));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ((*empty)->inputs[0].tensor.num_elements(), 0);
  auto nested_empty = Parse(OneInput("FP32", "[2,0]", "[[],[]]"));
  ASSERT_TRUE(nested_empty.ok()) << nested_empty.status().ToString();
}

TEST(InferJsonParseTest, ElementCountMustMatchShape) {
  ExpectInvalid(OneInput("FP32", "[2,3]", "[1,2,3,4,5]"), {"'x'", "5 elements", "[2,3]", "6"});
  ExpectInvalid(OneInput("FP32", "[1]", "[1,2]"), {"'x'", "2 elements", "needs 1"});
  ExpectInvalid(OneInput("FP32", "[1]", "[]"), {"'x'", "0 elements"});
  // A huge shape with little data is refused before any allocation.
  ExpectInvalid(OneInput("FP32", "[1000000000]", "[1,2,3]"), {"'x'", "3 elements"});
  ExpectInvalid(OneInput("BYTES", "[10000,10000]", "[\"a\"]"), {"'x'", "1 elements"});
  // Beyond kMaxTensorElements the shape alone is refused.
  ExpectInvalid(OneInput("FP32", "[1000000000000]", "[1,2,3]"),
                {"'x'", "1000000000000 elements", "more than the limit of 2147483648"});
  ExpectInvalid(OneInput("BYTES", "[100000000,100000000]", "[\"a\"]"), {"'x'", "the limit"});
}

TEST(InferJsonParseTest, BadShapes) {
  ExpectInvalid(OneInput("FP32", "[-1]", "[1]"), {"'x'", "shape", "-1", "non-negative"});
  ExpectInvalid(OneInput("FP32", "[1.5]", "[1]"), {"'x'", "shape", "1.5"});
  ExpectInvalid(OneInput("FP32", "[\"1\"]", "[1]"), {"'x'", "shape"});
  ExpectInvalid(OneInput("FP32", "[[1]]", "[1]"), {"'x'", "shape"});
  ExpectInvalid(OneInput("FP32", "1", "[1]"), {"'x'", "'shape' must be an array"});
  ExpectInvalid(OneInput("FP32", "[18446744073709551615]", "[1]"), {"'x'", "too large"});
  ExpectInvalid(OneInput("FP32", "[1,1,1,1,1,1,1,1,1]", "[1]"), {"'x'", "more than 8 dims"});
  ExpectInvalid(OneInput("FP32", "[4294967296,4294967296,4294967296]", "[1]"),
                {"'x'", "invalid shape"});
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","data":[1]}]})", {"'x'", "no 'shape'"});
}

TEST(InferJsonParseTest, BadDatatypes) {
  ExpectInvalid(OneInput("FLOAT32", "[1]", "[1]"), {"'x'", "invalid datatype 'FLOAT32'"});
  ExpectInvalid(OneInput("fp32", "[1]", "[1]"), {"'x'", "invalid datatype 'fp32'"});
  ExpectInvalid(OneInput("INVALID", "[1]", "[1]"), {"'x'", "invalid datatype"});
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[1],"data":[1]}]})", {"'x'", "'datatype'"});
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":32,"shape":[1],"data":[1]}]})",
                {"'x'", "'datatype'"});
}

TEST(InferJsonParseTest, DataSources) {
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]})", {"'x'", "no 'data'"});
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],
                   "parameters":{"binary_data_size":4}}]})",
                {"'x'", "only one of"});
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],
                   "parameters":{"shared_memory_region":"r"}}]})",
                {"'x'", "only one of"});
  // A JSON-only body has no binary section.
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],
                   "parameters":{"binary_data_size":4}}]})",
                {"unexpected size for input 'x'", "binary_data_size is 4 bytes", "only 0"});
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],
                 "parameters":{"shared_memory_region":"r"}}]})",
              StatusCode::kUnimplemented, {"'x'", "shared memory"});
  ExpectInvalid(OneInput("FP32", "[1]", "1"), {"'x'", "'data' must be an array", "an integer"});
  ExpectInvalid(OneInput("FP32", "[1]", "{\"a\":1}"), {"'x'", "'data' must be an array"});
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],
                   "parameters":[]}]})",
                {"'x'", "'parameters' must be an object"});
}

TEST(InferJsonParseTest, BadStructure) {
  ExpectInvalid("", {"empty"});
  ExpectInvalid("   ", {"empty"});
  ExpectInvalid("{", {"malformed JSON"});
  ExpectInvalid(R"({"inputs":[}])", {"malformed JSON"});
  ExpectInvalid(R"({"inputs":[]} trailing)", {"malformed JSON"});
  ExpectInvalid("{\"inputs\":[],\"id\":\"\xFF\"}", {"malformed JSON"});  // invalid UTF-8
  ExpectInvalid("[]", {"must be a JSON object", "an array"});
  ExpectInvalid("42", {"must be a JSON object"});
  ExpectInvalid("{}", {"no 'inputs'"});
  ExpectInvalid(R"({"inputs":{}})", {"'inputs' must be an array"});
  ExpectInvalid(R"({"inputs":[1]})", {"inputs[0] must be an object"});
  ExpectInvalid(R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})",
                {"inputs[0] has no 'name'"});
  ExpectInvalid(R"({"inputs":[{"name":7,"datatype":"FP32","shape":[1],"data":[1]}]})",
                {"inputs[0] has no 'name'"});
  ExpectInvalid(R"({"id":5,"inputs":[]})", {"'id' must be a string"});
  ExpectInvalid(R"({"inputs":[],"outputs":{}})", {"'outputs' must be an array"});
  ExpectInvalid(R"({"inputs":[],"outputs":["y"]})", {"outputs[0] must be an object"});
  ExpectInvalid(R"({"inputs":[],"outputs":[{"parameters":{}}]})", {"outputs[0] has no 'name'"});
  ExpectInvalid(R"({"inputs":[],"outputs":[{"name":"y","parameters":5}]})",
                {"'y'", "'parameters' must be an object"});
  ExpectInvalid(R"({"inputs":[],"parameters":[1]})", {"'parameters' must be an object"});
  ExpectInvalid(R"({"inputs":[],"parameters":{"triton_enable_x":true}})",
                {"triton_enable_x", "reserved"});
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]},
                              {"name":"x","datatype":"FP32","shape":[1],"data":[2]}]})",
                {"'x'", "more than once"});
  ExpectInvalid(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"classification":0}}]})",
                {"'y'", "'classification' must be a positive integer"});
  ExpectInvalid(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"classification":"3"}}]})",
                {"'y'", "'classification'"});
  ExpectInvalid(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"binary_data":1}}]})",
                {"'y'", "'binary_data' must be a boolean"});
  ExpectError(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"shared_memory_region":"r"}}]})",
              StatusCode::kUnimplemented, {"'y'", "shared memory"});
}

TEST(InferJsonParseTest, DepthBombsDoNotRecurse) {
  for (size_t depth : {101u, 1000u, 100000u}) {
    ExpectInvalid(std::string(depth, '['), {"malformed JSON"});
    ExpectInvalid(std::string(depth, '[') + std::string(depth, ']'), {"nesting deeper than 100"});
    ExpectInvalid(OneInput("FP32", "[1]", std::string(depth, '[') + "1" + std::string(depth, ']')),
                  {"nesting deeper than 100"});
    std::string objects;
    for (size_t i = 0; i < depth; ++i) objects += "{\"a\":";
    ExpectInvalid(objects + "1" + std::string(depth, '}'), {"nesting deeper"});
  }
  // Nesting that fits the limit is fine.
  const std::string nested = std::string(90, '[') + "1" + std::string(90, ']');
  auto r = Parse(OneInput("FP32", "[1]", nested));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

TEST(InferJsonParseTest, PaddedBodyParsesInPlace) {
  std::string body = OneInput("INT8", "[2]", "[1,-2]");
  body.reserve(body.size() + kJsonPaddingBytes);
  auto r = Parse(body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->inputs[0].tensor.data<int8_t>()[1], -2);
}

template <typename T>
InferOutput MakeOutput(const std::string& name, DataType dtype, Shape shape,
                       std::initializer_list<T> values) {
  auto t = OwnedTensor::Allocate(dtype, shape);
  EXPECT_TRUE(t.ok());
  T* p = t->template data<T>();
  for (const T& v : values) *p++ = v;
  return InferOutput{name, std::move(t).value()};
}

TEST(InferJsonWriteTest, AllJsonDatatypes) {
  InferResponse resp;
  resp.model_name = "m";
  resp.model_version = 3;
  resp.id = "abc";
  resp.outputs.push_back(MakeOutput<bool>("b", DataType::kBool, {2}, {true, false}));
  resp.outputs.push_back(MakeOutput<uint8_t>("u8", DataType::kUint8, {2}, {0, 255}));
  resp.outputs.push_back(MakeOutput<uint16_t>("u16", DataType::kUint16, {1}, {65535}));
  resp.outputs.push_back(MakeOutput<uint32_t>("u32", DataType::kUint32, {1}, {4294967295u}));
  resp.outputs.push_back(
      MakeOutput<uint64_t>("u64", DataType::kUint64, {1}, {18446744073709551615ull}));
  resp.outputs.push_back(MakeOutput<int8_t>("i8", DataType::kInt8, {1}, {-128}));
  resp.outputs.push_back(MakeOutput<int16_t>("i16", DataType::kInt16, {1}, {-32768}));
  resp.outputs.push_back(MakeOutput<int32_t>("i32", DataType::kInt32, {1}, {-7}));
  resp.outputs.push_back(
      MakeOutput<int64_t>("i64", DataType::kInt64, {1}, {-9223372036854775807LL - 1}));
  resp.outputs.push_back(MakeOutput<float>("f32", DataType::kFloat32, {2, 2},
                                           {0.1f, 1.0f, std::numeric_limits<float>::quiet_NaN(),
                                            -std::numeric_limits<float>::infinity()}));
  resp.outputs.push_back(MakeOutput<double>("f64", DataType::kFloat64, {1}, {0.1}));
  resp.outputs.push_back(MakeOutput<std::string>("s", DataType::kBytes, {2},
                                                 {std::string("a\"b"), std::string("\xFF")}));
  std::string json;
  ASSERT_TRUE(AppendInferResponseJson(resp, &json).ok());
  EXPECT_EQ(json,
            R"({"id":"abc","model_name":"m","model_version":"3","outputs":[)"
            R"({"name":"b","datatype":"BOOL","shape":[2],"data":[true,false]},)"
            R"({"name":"u8","datatype":"UINT8","shape":[2],"data":[0,255]},)"
            R"({"name":"u16","datatype":"UINT16","shape":[1],"data":[65535]},)"
            R"({"name":"u32","datatype":"UINT32","shape":[1],"data":[4294967295]},)"
            R"({"name":"u64","datatype":"UINT64","shape":[1],"data":[18446744073709551615]},)"
            R"({"name":"i8","datatype":"INT8","shape":[1],"data":[-128]},)"
            R"({"name":"i16","datatype":"INT16","shape":[1],"data":[-32768]},)"
            R"({"name":"i32","datatype":"INT32","shape":[1],"data":[-7]},)"
            R"({"name":"i64","datatype":"INT64","shape":[1],"data":[-9223372036854775808]},)"
            R"({"name":"f32","datatype":"FP32","shape":[2,2],"data":[0.1,1.0,"NaN","-Infinity"]},)"
            R"({"name":"f64","datatype":"FP64","shape":[1],"data":[0.1]},)"
            R"({"name":"s","datatype":"BYTES","shape":[2],"data":["a\"b",")"
            "\xEF\xBF\xBD"
            R"("]}]})");
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(json).get(root), simdjson::SUCCESS) << json;
}

TEST(InferJsonWriteTest, NoIdWhenEmptyAndRoundTripThroughParser) {
  InferResponse resp;
  resp.model_name = "add_sub";
  resp.model_version = 1;
  resp.outputs.push_back(
      MakeOutput<float>("OUTPUT0", DataType::kFloat32, {1, 3}, {1.5f, -2.f, 3.25f}));
  std::string json;
  ASSERT_TRUE(AppendInferResponseJson(resp, &json).ok());
  EXPECT_EQ(json, R"({"model_name":"add_sub","model_version":"1","outputs":[)"
                  R"({"name":"OUTPUT0","datatype":"FP32","shape":[1,3],"data":[1.5,-2.0,3.25]}]})");
}

TEST(InferJsonWriteTest, HalfPrecisionOutputIsAnError) {
  InferResponse resp;
  resp.outputs.push_back(MakeOutput<Float16>("h", DataType::kFloat16, {1}, {Float16{0x3C00}}));
  std::string json;
  Status s = AppendInferResponseJson(resp, &json);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'h'"), std::string::npos);
  EXPECT_NE(s.message().find("FP16"), std::string::npos);
}

TEST(InferJsonWriteTest, MissingTensorIsInternal) {
  InferResponse resp;
  resp.outputs.push_back(InferOutput{"y", OwnedTensor()});
  std::string json;
  EXPECT_EQ(AppendInferResponseJson(resp, &json).code(), StatusCode::kInternal);
}

// Binary tensor data extension: a JSON header followed by the binary section.
struct Body {
  std::shared_ptr<std::string> bytes;
  size_t json_bytes;
};

Body MakeBody(const std::string& json, const std::string& binary) {
  auto bytes = std::make_shared<std::string>(json + binary);
  bytes->reserve(bytes->size() + kJsonPaddingBytes);
  return {bytes, json.size()};
}

std::string Le32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

template <typename T>
std::string RawOf(std::initializer_list<T> values) {
  std::string s;
  for (const T& v : values) s.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return s;
}

void ExpectBinaryInvalid(const Body& body, std::initializer_list<std::string_view> parts) {
  auto r = ParseInferRequest(body.bytes, body.json_bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  for (std::string_view part : parts) {
    EXPECT_NE(r.status().message().find(part), std::string::npos)
        << "message '" << r.status().message() << "' lacks '" << part << "'";
  }
}

TEST(InferBinaryParseTest, InputsTakeTheirBytesInOrder) {
  // FP16 1.0 = 0x3C00, BF16 -2.0 = 0xC000 (bit patterns written here, not converted).
  const std::string json =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},)"
      R"({"name":"j","datatype":"INT32","shape":[1],"data":[7]},)"
      R"({"name":"h","datatype":"FP16","shape":[1],"parameters":{"binary_data_size":2}},)"
      R"({"name":"b","datatype":"BF16","shape":[1],"parameters":{"binary_data_size":2}},)"
      R"({"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":13}},)"
      R"({"name":"e","datatype":"INT64","shape":[0],"parameters":{"binary_data_size":0}}]})";
  const std::string binary = RawOf<float>({1.5f, -3.0f}) + RawOf<uint16_t>({0x3C00}) +
                             RawOf<uint16_t>({0xC000}) + Le32(2) + "hi" + Le32(3) + "abc";
  Body body = MakeBody(json, binary);
  const std::string* base = body.bytes.get();
  auto r = ParseInferRequest(body.bytes, body.json_bytes);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const InferRequest& req = *r->request;
  ASSERT_EQ(req.inputs.size(), 6u);
  EXPECT_EQ(req.inputs[0].tensor.data<float>()[0], 1.5f);
  EXPECT_EQ(req.inputs[0].tensor.data<float>()[1], -3.0f);
  EXPECT_EQ(req.inputs[1].tensor.data<int32_t>()[0], 7);
  EXPECT_EQ(req.inputs[2].tensor.dtype(), DataType::kFloat16);
  uint16_t bits = 0;
  std::memcpy(&bits, req.inputs[2].tensor.raw_data(), 2);
  EXPECT_EQ(bits, 0x3C00);
  std::memcpy(&bits, req.inputs[3].tensor.raw_data(), 2);
  EXPECT_EQ(bits, 0xC000);
  EXPECT_EQ(req.inputs[4].tensor.data<std::string>()[0], "hi");
  EXPECT_EQ(req.inputs[4].tensor.data<std::string>()[1], "abc");
  EXPECT_EQ(req.inputs[5].tensor.num_elements(), 0);
  // Aligned fixed-size inputs view the body; the tensors keep it alive after the caller's
  // reference is gone.
  const char* binary_start = base->data() + json.size();
  const bool aligned = reinterpret_cast<uintptr_t>(binary_start) % 4 == 0;
  if (aligned) {
    EXPECT_EQ(req.inputs[0].tensor.raw_data(), binary_start);
  }
  body.bytes.reset();
  EXPECT_EQ(req.inputs[0].tensor.data<float>()[1], -3.0f);
}

TEST(InferBinaryParseTest, AlignedBodyIsBorrowed) {
  // Pad the JSON with spaces to a multiple of 8 so the binary section is aligned.
  std::string json =
      R"({"inputs":[{"name":"a","datatype":"FP64","shape":[1],"parameters":{"binary_data_size":8}}]})";
  while (json.size() % 8 != 0) json += ' ';
  Body body = MakeBody(json, RawOf<double>({2.25}));
  auto r = ParseInferRequest(body.bytes, body.json_bytes);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->request->inputs[0].tensor.raw_data(), body.bytes->data() + json.size());
  EXPECT_GE(body.bytes.use_count(), 2);
  EXPECT_EQ(r->request->inputs[0].tensor.data<double>()[0], 2.25);
}

TEST(InferBinaryParseTest, BadFraming) {
  const std::string one_fp32 =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]})";
  ExpectBinaryInvalid(MakeBody(one_fp32, std::string(4, '\0')),
                      {"unexpected size for input 'a'", "binary_data_size is 8", "only 4"});
  ExpectBinaryInvalid(MakeBody(one_fp32, std::string(12, '\0')),
                      {"unexpected additional input data", "12 bytes", "account for 8"});
  ExpectBinaryInvalid(
      MakeBody(
          R"({"inputs":[{"name":"a","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":8}}]})",
          std::string(8, '\0')),
      {"input 'a'", "8 bytes of binary data", "needs 12 bytes"});
  ExpectBinaryInvalid(
      MakeBody(
          R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":-8}}]})",
          std::string(8, '\0')),
      {"input 'a'", "'binary_data_size' must be a non-negative integer", "-8"});
  ExpectBinaryInvalid(
      MakeBody(
          R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":"8"}}]})",
          std::string(8, '\0')),
      {"'binary_data_size' must be a non-negative integer"});
  ExpectBinaryInvalid(
      MakeBody(
          R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":18446744073709551615}}]})",
          std::string(8, '\0')),
      {"unexpected size for input 'a'"});
  // BYTES with prefixes that do not add up.
  ExpectBinaryInvalid(
      MakeBody(
          R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]})",
          Le32(9) + "ab"),
      {"input 's'", "declares 9 bytes but only 2 remain"});
  ExpectBinaryInvalid(
      MakeBody(
          R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":7}}]})",
          Le32(2) + "abc"),
      {"input 's'", "1 bytes left"});
  // BOOL bytes must be 0 or 1.
  ExpectBinaryInvalid(
      MakeBody(
          R"({"inputs":[{"name":"b","datatype":"BOOL","shape":[2],"parameters":{"binary_data_size":2}}]})",
          std::string("\x01\x07", 2)),
      {"input 'b'", "BOOL element 1 is byte 7"});
  // Binary section present but no input claims it.
  ExpectBinaryInvalid(MakeBody(R"({"inputs":[]})", "xyz"), {"unexpected additional input data"});
}

TEST(InferBinaryParseTest, ResponseEncodingChoices) {
  Body body = MakeBody(R"({"inputs":[],"parameters":{"binary_data_output":true},"outputs":[)"
                       R"({"name":"a","parameters":{"binary_data":false}},{"name":"b"},)"
                       R"({"name":"c","parameters":{"binary_data":true,"classification":3}}]})",
                       "");
  auto r = ParseInferRequest(body.bytes, body.json_bytes);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ResponseEncoding& e = r->encoding;
  EXPECT_TRUE(e.binary_data_output);
  EXPECT_FALSE(e.IsBinary("a"));
  EXPECT_TRUE(e.IsBinary("b"));  // listed without binary_data: binary_data_output
  EXPECT_TRUE(e.IsBinary("c"));
  EXPECT_TRUE(e.IsBinary("unlisted"));
  EXPECT_EQ(e.ClassCount("c"), 3);
  EXPECT_EQ(e.ClassCount("a"), 0);
  ASSERT_EQ(r->request->outputs.size(), 3u);
  EXPECT_EQ(r->request->outputs[2].name, "c");
  Body bad = MakeBody(R"({"inputs":[],"parameters":{"binary_data_output":1}})", "");
  ExpectBinaryInvalid(bad, {"'binary_data_output' must be a boolean"});
}

TEST(InferRequestParametersTest, SequenceParametersAreRefused) {
  for (const char* params :
       {R"("sequence_id":5)", R"("sequence_id":"corr")", R"("sequence_start":true)",
        R"("sequence_end":true)", R"("sequence_start":"yes")"}) {
    ExpectInvalid(std::string(R"({"inputs":[],"parameters":{)") + params + "}}",
                  {"sequence batching is not supported"});
  }
  // "Not in a sequence" values and custom parameters are accepted.
  EXPECT_TRUE(
      Parse(R"({"inputs":[],"parameters":{"sequence_id":0,"sequence_start":false,"custom":1.5}})")
          .ok());
  EXPECT_TRUE(Parse(R"({"inputs":[],"parameters":{"sequence_id":"","sequence_end":false}})").ok());
}

TEST(InferRequestParametersTest, ValuesMustBeBooleansNumbersOrStrings) {
  ExpectInvalid(R"({"inputs":[],"parameters":{"custom":{"nested":1}}})",
                {"request parameter 'custom'", "an object"});
  ExpectInvalid(R"({"inputs":[],"parameters":{"tags":[1,2]}})",
                {"request parameter 'tags'", "an array"});
  ExpectInvalid(R"({"inputs":[],"parameters":{"none":null}})",
                {"request parameter 'none'", "null"});
  ExpectInvalid(
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],"parameters":{"p":{}}}]})",
      {"input 'x': parameter 'p'", "an object"});
  ExpectInvalid(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"q":[]}}]})",
                {"output 'y': parameter 'q'", "an array"});
  EXPECT_TRUE(Parse(R"({"inputs":[],"parameters":{"a":true,"b":-3,"c":2.5,"d":"s"}})").ok());
}

TEST(InferBinaryWriteTest, BinaryOutputsFollowTheJson) {
  InferResponse resp;
  resp.model_name = "m";
  resp.model_version = 2;
  resp.outputs.push_back(MakeOutput<float>("f", DataType::kFloat32, {2}, {1.0f, 2.0f}));
  resp.outputs.push_back(MakeOutput<int32_t>("j", DataType::kInt32, {1}, {5}));
  resp.outputs.push_back(MakeOutput<Float16>("h", DataType::kFloat16, {1}, {Float16{0x3C00}}));
  resp.outputs.push_back(MakeOutput<std::string>("s", DataType::kBytes, {2}, {"ab", ""}));
  ResponseEncoding enc;
  enc.binary_data_output = true;
  enc.outputs.push_back({"j", false, 0});
  EncodedInferResponse out;
  ASSERT_TRUE(EncodeInferResponse(resp, enc, &out).ok());
  EXPECT_TRUE(out.binary);
  const std::string json = out.body.substr(0, out.json_bytes);
  EXPECT_EQ(
      json,
      R"({"model_name":"m","model_version":"2","outputs":[)"
      R"({"name":"f","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},)"
      R"({"name":"j","datatype":"INT32","shape":[1],"data":[5]},)"
      R"({"name":"h","datatype":"FP16","shape":[1],"parameters":{"binary_data_size":2}},)"
      R"({"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":10}}]})");
  const std::string expected_binary =
      RawOf<float>({1.0f, 2.0f}) + RawOf<uint16_t>({0x3C00}) + Le32(2) + "ab" + Le32(0);
  EXPECT_EQ(out.body.substr(out.json_bytes), expected_binary);
}

TEST(InferBinaryWriteTest, AllJsonHasNoBinarySection) {
  InferResponse resp;
  resp.outputs.push_back(MakeOutput<float>("f", DataType::kFloat32, {1}, {1.0f}));
  EncodedInferResponse out;
  ASSERT_TRUE(EncodeInferResponse(resp, ResponseEncoding{}, &out).ok());
  EXPECT_FALSE(out.binary);
  EXPECT_EQ(out.json_bytes, out.body.size());
  // FP16 requested as JSON is refused with advice.
  resp.outputs.push_back(MakeOutput<Float16>("h", DataType::kFloat16, {1}, {Float16{0x3C00}}));
  Status s = EncodeInferResponse(resp, ResponseEncoding{}, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'binary_data': true"), std::string::npos);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

ModelSignature OneInputModel(DataType dtype, std::vector<int64_t> dims, int max_batch_size) {
  ModelSignature sig;
  sig.name = "m";
  sig.max_batch_size = max_batch_size;
  sig.inputs.push_back({"x", dtype, std::move(dims)});
  sig.outputs.push_back({"y", dtype, {}});
  return sig;
}

Result<ParsedInferRequest> ParseRaw(std::string body, const ModelSignature& sig) {
  return ParseInferHttpBody(std::move(body), "", "0", 1 << 20, sig);
}

TEST(InferRawBinaryTest, FixedShapeTakesTheWholeBodyAsBatchOne) {
  const std::string bytes = RawOf<float>({1.f, 2.f, 3.f, 4.f, 5.f, 6.f});
  auto r = ParseRaw(bytes, OneInputModel(DataType::kFloat32, {2, 3}, 4));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->request->inputs.size(), 1u);
  const OwnedTensor& t = r->request->inputs[0].tensor;
  EXPECT_EQ(r->request->inputs[0].name, "x");
  ASSERT_EQ(t.shape().rank(), 3);
  EXPECT_EQ(t.shape()[0], 1);
  EXPECT_EQ(t.shape()[1], 2);
  EXPECT_EQ(t.shape()[2], 3);
  EXPECT_EQ(t.data<float>()[5], 6.f);
  EXPECT_TRUE(r->encoding.IsBinary("y"));
  // Without batching the configured shape is the whole shape.
  auto plain = ParseRaw(bytes, OneInputModel(DataType::kFloat32, {6}, 0));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->request->inputs[0].tensor.shape().rank(), 1);
  EXPECT_EQ(plain->request->inputs[0].tensor.shape()[0], 6);
}

TEST(InferRawBinaryTest, OneVariableDimIsDeducedFromTheSize) {
  auto r =
      ParseRaw(RawOf<int64_t>({1, 2, 3, 4, 5, 6}), OneInputModel(DataType::kInt64, {-1, 2}, 8));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const OwnedTensor& t = r->request->inputs[0].tensor;
  ASSERT_EQ(t.shape().rank(), 3);
  EXPECT_EQ(t.shape()[0], 1);
  EXPECT_EQ(t.shape()[1], 3);
  EXPECT_EQ(t.shape()[2], 2);
  EXPECT_EQ(t.data<int64_t>()[4], 5);
  auto empty = ParseRaw("", OneInputModel(DataType::kInt64, {-1, 2}, 0));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->request->inputs[0].tensor.shape()[0], 0);
}

TEST(InferRawBinaryTest, BytesInputIsOneElement) {
  auto r = ParseRaw(std::string("hello\0world", 11), OneInputModel(DataType::kBytes, {1}, 2));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const OwnedTensor& t = r->request->inputs[0].tensor;
  EXPECT_EQ(t.num_elements(), 1);
  EXPECT_EQ(t.data<std::string>()[0], std::string("hello\0world", 11));
}

TEST(InferRawBinaryTest, RefusalsNameTheModelAndTheProblem) {
  ModelSignature two = OneInputModel(DataType::kFloat32, {2}, 0);
  two.inputs.push_back({"z", DataType::kFloat32, {2}});
  struct Case {
    std::string body;
    ModelSignature sig;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {RawOf<float>({1.f}), two, "exactly one input"},
      {RawOf<float>({1.f}), OneInputModel(DataType::kFloat32, {-1, -1}, 0),
       "more than one variable dimension"},
      {RawOf<float>({1.f, 2.f, 3.f}), OneInputModel(DataType::kFloat32, {2}, 0),
       "expected 8 bytes, got 12"},
      {std::string(7, 'a'), OneInputModel(DataType::kFloat32, {-1, 2}, 0),
       "not a whole number of 8-byte rows"},
      {"abc", OneInputModel(DataType::kBytes, {2}, 0), "shape [1]"},
      {std::string(1, '\x02'), OneInputModel(DataType::kBool, {1}, 0), "'x'"},
  };
  for (const Case& c : cases) {
    auto r = ParseRaw(c.body, c.sig);
    ASSERT_FALSE(r.ok()) << c.needle;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace kiln
