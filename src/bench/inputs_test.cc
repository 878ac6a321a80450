// SPDX-License-Identifier: Apache-2.0
// Inputs, request encoding and the control-endpoint parsers of kiln bench.
#include "bench/inputs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "bench/control.h"
#include "bench/request_bytes.h"

namespace kiln::bench {
namespace {

ModelInfo AddSub() {
  ModelInfo m;
  m.name = "add_sub";
  m.max_batch_size = 8;
  m.inputs = {{"INPUT0", "FP32", {-1, 16}}, {"INPUT1", "FP32", {-1, 16}}};
  m.outputs = {{"OUTPUT0", "FP32", {-1, 16}}, {"OUTPUT1", "FP32", {-1, 16}}};
  return m;
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("kiln_bench_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(InputsTest, RandomDataHasTheBatchedShape) {
  InputOptions o;
  o.batch_size = 3;
  auto sets = MakeInputs(AddSub(), o);
  ASSERT_TRUE(sets.ok()) << sets.status().ToString();
  ASSERT_EQ(sets->size(), 4u);
  const TensorData& t = (*sets)[0][1];
  EXPECT_EQ(t.name, "INPUT1");
  EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 16}));
  EXPECT_EQ(t.raw.size(), 3u * 16 * 4);
  EXPECT_NE((*sets)[0][0].raw, (*sets)[1][0].raw);  // distinct sets
}

TEST(InputsTest, VariableDimNeedsShapeFlag) {
  ModelInfo m = AddSub();
  m.inputs[0].shape = {-1, -1};
  auto r = MakeInputs(m, InputOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("INPUT0"), std::string::npos);
  EXPECT_NE(r.status().message().find("--shape"), std::string::npos);
  InputOptions o;
  o.shapes["INPUT0"] = {5};
  auto ok = MakeInputs(m, o);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0][0].shape, (std::vector<int64_t>{1, 5}));
}

TEST(InputsTest, BatchLimits) {
  InputOptions o;
  o.batch_size = 9;
  EXPECT_FALSE(MakeInputs(AddSub(), o).ok());
  ModelInfo m = AddSub();
  m.max_batch_size = 0;
  m.inputs[0].shape = m.inputs[1].shape = {16};
  o.batch_size = 2;
  EXPECT_FALSE(MakeInputs(m, o).ok());
  o.batch_size = 1;
  auto r = MakeInputs(m, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0][0].shape, (std::vector<int64_t>{16}));  // no batch dim
}

TEST(InputsTest, ShapeFlagParsing) {
  auto r = ParseShapeFlag("IN:3,224,224");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, "IN");
  EXPECT_EQ(r->second, (std::vector<int64_t>{3, 224, 224}));
  EXPECT_FALSE(ParseShapeFlag("IN").ok());
  EXPECT_FALSE(ParseShapeFlag("IN:3,x").ok());
  EXPECT_FALSE(ParseShapeFlag("IN:-1").ok());
}

TEST(InputsTest, PerfAnalyzerJsonFile) {
  std::string path = TempPath("data.json");
  {
    std::ofstream f(path);
    f << R"({"data": [
      {"INPUT0": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],
       "INPUT1": {"content": [[0,0,0,0,0,0,0,0],[0,0,0,0,0,0,0,0.5]], "shape": [16]}},
      {"INPUT0": [16,15,14,13,12,11,10,9,8,7,6,5,4,3,2,1],
       "INPUT1": {"content": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1], "shape": [16]}}]})";
  }
  InputOptions o;
  o.input_data = path;
  auto sets = MakeInputs(AddSub(), o);
  std::filesystem::remove(path);
  ASSERT_TRUE(sets.ok()) << sets.status().ToString();
  ASSERT_EQ(sets->size(), 2u);
  const TensorData& in0 = (*sets)[0][0];
  EXPECT_EQ(in0.shape, (std::vector<int64_t>{1, 16}));
  float f[16];
  std::memcpy(f, in0.raw.data(), sizeof(f));
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[15], 16.0f);
  std::memcpy(f, (*sets)[0][1].raw.data(), sizeof(f));
  EXPECT_EQ(f[15], 0.5f);
  std::memcpy(f, (*sets)[1][0].raw.data(), sizeof(f));
  EXPECT_EQ(f[0], 16.0f);
}

TEST(InputsTest, JsonFileErrorsNameTheProblem) {
  std::string path = TempPath("bad.json");
  {
    std::ofstream f(path);
    f << R"({"data": [{"INPUT0": [1,2,3]}]})";
  }
  InputOptions o;
  o.input_data = path;
  auto r = MakeInputs(AddSub(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("INPUT0"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("3 elements"), std::string::npos) << r.status().message();
  std::filesystem::remove(path);
  o.input_data = TempPath("missing.json");
  EXPECT_FALSE(MakeInputs(AddSub(), o).ok());
}

// perf_analyzer's "b64": the tensor's raw content, base64-encoded; BYTES as length-prefixed
// elements (an image upload, say).
TEST(InputsTest, PerfAnalyzerBase64Data) {
  // 16 little-endian FP32 values 0, 1, ..., 15, and two BYTES elements "ab" and "\xff\x00\x01".
  std::string floats;
  for (int i = 0; i < 16; ++i) {
    const float v = static_cast<float>(i);
    floats.append(reinterpret_cast<const char*>(&v), 4);
  }
  auto b64 = [](const std::string& raw) {
    static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (size_t i = 0; i < raw.size(); i += 3) {
      uint32_t n = static_cast<uint8_t>(raw[i]) << 16;
      if (i + 1 < raw.size()) n |= static_cast<uint8_t>(raw[i + 1]) << 8;
      if (i + 2 < raw.size()) n |= static_cast<uint8_t>(raw[i + 2]);
      out += a[(n >> 18) & 63];
      out += a[(n >> 12) & 63];
      out += i + 1 < raw.size() ? a[(n >> 6) & 63] : '=';
      out += i + 2 < raw.size() ? a[n & 63] : '=';
    }
    return out;
  };
  const std::string bytes = std::string("\x02\0\0\0ab\x03\0\0\0\xff\0\x01", 13);
  ModelInfo m;
  m.name = "m";
  m.max_batch_size = 4;
  m.inputs = {{"X", "FP32", {-1, 16}}, {"IMAGE", "BYTES", {-1, 2}}};
  m.outputs = {{"Y", "FP32", {-1, 1}}};
  std::string path = TempPath("b64.json");
  {
    std::ofstream f(path);
    f << "{\"data\": [{\"X\": {\"b64\": \"" << b64(floats) << "\"}, \"IMAGE\": {\"b64\": \""
      << b64(bytes) << "\"}}]}";
  }
  InputOptions o;
  o.input_data = path;
  auto sets = MakeInputs(m, o);
  ASSERT_TRUE(sets.ok()) << sets.status().ToString();
  ASSERT_EQ(sets->size(), 1u);
  EXPECT_EQ((*sets)[0][0].raw, floats);
  EXPECT_EQ((*sets)[0][0].shape, (std::vector<int64_t>{1, 16}));
  EXPECT_EQ((*sets)[0][1].raw, bytes);
  EXPECT_EQ((*sets)[0][1].shape, (std::vector<int64_t>{1, 2}));
  // Raw content that does not fit the datatype or the shape.
  {
    std::ofstream f(path);
    f << "{\"data\": [{\"X\": {\"b64\": \"" << b64(floats.substr(0, 6))
      << "\"}, \"IMAGE\": {\"b64\": \"" << b64(bytes) << "\"}}]}";
  }
  auto bad = MakeInputs(m, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a whole number of FP32 elements"), std::string::npos)
      << bad.status().message();
  {
    std::ofstream f(path);
    f << "{\"data\": [{\"X\": {\"b64\": \"" << b64(floats) << "\"}, \"IMAGE\": {\"b64\": \""
      << b64(bytes.substr(0, 10)) << "\"}}]}";
  }
  bad = MakeInputs(m, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("claims 3 bytes"), std::string::npos)
      << bad.status().message();
  std::filesystem::remove(path);
}

TEST(InputsTest, NpyDirectory) {
  std::string dir = TempPath("npy");
  std::filesystem::create_directories(dir);
  for (const char* name : {"INPUT0", "INPUT1"}) {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (16,), }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::ofstream f(dir + "/" + name + ".npy", std::ios::binary);
    f.write("\x93NUMPY\x01\x00", 8);
    uint16_t len = static_cast<uint16_t>(header.size());
    f.write(reinterpret_cast<const char*>(&len), 2);
    f << header;
    for (int i = 0; i < 16; ++i) {
      float v = static_cast<float>(i) * 0.25f;
      f.write(reinterpret_cast<const char*>(&v), 4);
    }
  }
  InputOptions o;
  o.input_data = dir;
  o.batch_size = 2;
  auto sets = MakeInputs(AddSub(), o);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(sets.ok()) << sets.status().ToString();
  const TensorData& t = (*sets)[0][0];
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 16}));
  ASSERT_EQ(t.raw.size(), 2u * 16 * 4);
  float f;
  std::memcpy(&f, t.raw.data() + (16 + 3) * 4, 4);  // second batch item, element 3
  EXPECT_EQ(f, 0.75f);
}

TEST(RequestBytesTest, BinaryRequestLayout) {
  InputSet set = {{"INPUT0", "FP32", {1, 2}, std::string("\0\0\x80\x3f\0\0\0\x40", 8)}};
  std::vector<TensorSpec> outs = {{"OUTPUT0", "FP32", {-1, 2}}};
  std::string req = HttpInferRequest("h", "/v2/models/m/infer", set, outs, true);
  size_t end = req.find("\r\n\r\n");
  ASSERT_NE(end, std::string::npos);
  std::string head = req.substr(0, end), body = req.substr(end + 4);
  EXPECT_EQ(head.rfind("POST /v2/models/m/infer HTTP/1.1\r\n", 0), 0u);
  std::string json = InferJsonHeader(set, outs, true);
  EXPECT_NE(head.find("Inference-Header-Content-Length: " + std::to_string(json.size())),
            std::string::npos);
  EXPECT_NE(head.find("Content-Length: " + std::to_string(json.size() + 8)), std::string::npos);
  EXPECT_EQ(body.substr(0, json.size()), json);
  EXPECT_EQ(body.substr(json.size()), set[0].raw);
  EXPECT_NE(json.find("\"binary_data_size\":8"), std::string::npos);
  EXPECT_NE(json.find("{\"name\":\"OUTPUT0\",\"parameters\":{\"binary_data\":true}}"),
            std::string::npos);
}

TEST(RequestBytesTest, JsonRequestCarriesData) {
  InputSet set = {{"INPUT0", "FP32", {1, 2}, std::string("\0\0\x80\x3f\0\0\0\x40", 8)},
                  {"B", "BYTES", {1}, std::string("\x02\0\0\0hi", 6)}};
  std::string json = InferJsonHeader(set, {}, false);
  EXPECT_EQ(
      json,
      "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,2],\"datatype\":\"FP32\",\"data\":[1,2]},"
      "{\"name\":\"B\",\"shape\":[1],\"datatype\":\"BYTES\",\"data\":[\"hi\"]}]}");
  std::string req = HttpInferRequest("h", "/p", set, {}, false);
  EXPECT_EQ(req.find("Inference-Header-Content-Length"), std::string::npos);
  EXPECT_NE(req.find("Content-Length: " + std::to_string(json.size())), std::string::npos);
  EXPECT_EQ(InferPath("m", "3"), "/v2/models/m/versions/3/infer");
}

TEST(RequestBytesTest, RequestParametersParsedAndSent) {
  Result<RequestParameter> p = ParseRequestParameter("precision:int8:string");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->name, "precision");
  EXPECT_EQ(p->value, "int8");
  Result<RequestParameter> url = ParseRequestParameter("target:http://h:1:string");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->value, "http://h:1");  // the value may hold ':'
  EXPECT_TRUE(ParseRequestParameter("priority:2:uint").ok());
  EXPECT_TRUE(ParseRequestParameter("x:-3:int").ok());
  EXPECT_TRUE(ParseRequestParameter("x:0.5:double").ok());
  EXPECT_THAT(ParseRequestParameter("priority:two:uint").status().message(),
              ::testing::HasSubstr("value 'two' is not a uint"));
  EXPECT_THAT(ParseRequestParameter("x:nan:double").status().message(),
              ::testing::HasSubstr("not a finite double"));
  EXPECT_THAT(ParseRequestParameter("flag:yes:bool").status().message(),
              ::testing::HasSubstr("true or false"));
  EXPECT_THAT(ParseRequestParameter("x:1:float").status().message(),
              ::testing::HasSubstr("type 'float' is not one of"));
  EXPECT_THAT(ParseRequestParameter("novalue").status().message(),
              ::testing::HasSubstr("expected name:value:type"));

  InputSet set = {{"INPUT0", "FP32", {1}, std::string("\0\0\x80\x3f", 4)}};
  std::vector<RequestParameter> params = {*p, *ParseRequestParameter("priority:2:uint"),
                                          *ParseRequestParameter("fast:true:bool")};
  EXPECT_EQ(InferJsonHeader(set, {}, false, params),
            "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]}],"
            "\"parameters\":{\"precision\":\"int8\",\"priority\":2,\"fast\":true}}");
}

TEST(ControlParseTest, MetadataConfigAndStats) {
  auto m = ParseModelMetadataJson(
      R"({"name":"add_sub","versions":["1"],"platform":"onnxruntime_onnx","inputs":[{"name":"INPUT0","datatype":"FP32","shape":[-1,16]}],"outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[-1,16]}]})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->inputs[0].shape, (std::vector<int64_t>{-1, 16}));
  EXPECT_EQ(m->outputs[0].name, "OUTPUT0");
  auto mb = ParseMaxBatchSizeJson(R"({"name":"add_sub","max_batch_size":8})");
  ASSERT_TRUE(mb.ok());
  EXPECT_EQ(*mb, 8);
  const char* stats = R"({"model_stats":[
    {"name":"m","version":"1","inference_count":10,"execution_count":5,
     "inference_stats":{"success":{"count":4,"ns":4000},"queue":{"count":4,"ns":400}}},
    {"name":"m","version":"2","inference_count":30,"execution_count":10,
     "inference_stats":{"success":{"count":20,"ns":200000},"queue":{"count":20,"ns":40000},
      "compute_infer":{"count":20,"ns":100000}}}]})";
  auto latest = ParseStatsJson(stats, "");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->inference_count, 30u);  // the highest version
  auto v1 = ParseStatsJson(stats, "1");
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(v1->execution_count, 5u);
  EXPECT_FALSE(ParseStatsJson(stats, "7").ok());
  // Diff: per-request averages and the mean batch of the delta.
  ServerCounters before = *v1, after = *latest;
  ServerBreakdown d = Diff(before, after);
  EXPECT_EQ(d.inference_count, 20u);
  EXPECT_EQ(d.execution_count, 5u);
  EXPECT_DOUBLE_EQ(d.mean_batch, 4.0);
  EXPECT_DOUBLE_EQ(d.request_us, (200000 - 4000) / 16.0 / 1000);
  EXPECT_DOUBLE_EQ(d.queue_us, (40000 - 400) / 16.0 / 1000);
  EXPECT_DOUBLE_EQ(d.compute_infer_us, 100000 / 20.0 / 1000);
}

}  // namespace
}  // namespace kiln::bench
