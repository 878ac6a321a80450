// SPDX-License-Identifier: Apache-2.0
// Server and model metadata JSON (KSERVE-V2.md 1.3, 1.4).
#include "server/http/metadata_json.h"

#include <gtest/gtest.h>

#include <array>

namespace kiln {
namespace {

ModelSignature AddSub(int max_batch_size) {
  ModelSignature sig;
  sig.name = "add_sub";
  sig.platform = "onnxruntime_onnx";
  sig.backend = "onnxruntime";
  sig.max_batch_size = max_batch_size;
  sig.inputs = {{"INPUT0", DataType::kFloat32, {16}}, {"INPUT1", DataType::kFloat32, {16}}};
  sig.outputs = {{"OUTPUT0", DataType::kFloat32, {16}}, {"OUTPUT1", DataType::kInt64, {-1, 2}}};
  return sig;
}

TEST(MetadataJsonTest, Server) {
  EXPECT_EQ(ServerMetadataJson("kiln", "0.1.0", {}),
            R"({"name":"kiln","version":"0.1.0","extensions":[]})");
  const std::array<std::string_view, 2> ext = {"statistics", "binary_tensor_data"};
  EXPECT_EQ(ServerMetadataJson("kiln", "", ext),
            R"({"name":"kiln","version":"","extensions":["statistics","binary_tensor_data"]})");
}

TEST(MetadataJsonTest, BatchingModelGetsLeadingMinusOne) {
  const std::array<int64_t, 2> versions = {1, 3};
  EXPECT_EQ(ModelMetadataJson("add_sub", versions, AddSub(8)),
            R"({"name":"add_sub","versions":["1","3"],"platform":"onnxruntime_onnx",)"
            R"("inputs":[{"name":"INPUT0","datatype":"FP32","shape":[-1,16]},)"
            R"({"name":"INPUT1","datatype":"FP32","shape":[-1,16]}],)"
            R"("outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[-1,16]},)"
            R"({"name":"OUTPUT1","datatype":"INT64","shape":[-1,-1,2]}]})");
}

TEST(MetadataJsonTest, NonBatchingModelAndBackendFallback) {
  ModelSignature sig = AddSub(0);
  sig.platform.clear();
  const std::array<int64_t, 1> versions = {2};
  EXPECT_EQ(ModelMetadataJson("add_sub", versions, sig),
            R"({"name":"add_sub","versions":["2"],"platform":"onnxruntime",)"
            R"("inputs":[{"name":"INPUT0","datatype":"FP32","shape":[16]},)"
            R"({"name":"INPUT1","datatype":"FP32","shape":[16]}],)"
            R"("outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[16]},)"
            R"({"name":"OUTPUT1","datatype":"INT64","shape":[-1,2]}]})");
}

TEST(MetadataJsonTest, BytesModelUsesProtocolName) {
  ModelSignature sig;
  sig.inputs = {{"TEXT", DataType::kBytes, {1}}};
  EXPECT_NE(ModelMetadataJson("t", {}, sig).find(R"("datatype":"BYTES")"), std::string::npos);
}

}  // namespace
}  // namespace kiln
