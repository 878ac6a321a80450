// SPDX-License-Identifier: Apache-2.0
#include "server/http/config_json.h"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "repo/model_config.pb.h"

namespace kiln {
namespace {

inference::ModelConfig Parse(const std::string& text) {
  inference::ModelConfig c;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &c)) << text;
  return c;
}

constexpr char kConfig[] = R"(
name: "add_sub" platform: "onnxruntime_onnx" max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, 16 ] } ]
version_policy { specific { versions: [ 1, 3 ] } }
dynamic_batching {
  max_queue_delay_microseconds: 500
  priority_queue_policy { key: 2 value: { default_timeout_microseconds: 7 } }
}
instance_group [ { kind: KIND_CPU count: 2 } ]
parameters { key: "p" value: { string_value: "v" } }
optimization { cuda { graph_spec [ { batch_size: 4 input { key: "x" value: { dim: [ 3 ] } } } ] } }
)";

TEST(ModelConfigJson, RoundTripsThroughProtobufsJsonParser) {
  const inference::ModelConfig config = Parse(kConfig);
  const std::string json = ModelConfigJson(config);
  inference::ModelConfig back;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &back);
  ASSERT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(config, back)) << json;
}

TEST(ModelConfigJson, FollowsTheReferenceServersRendering) {
  const std::string json = ModelConfigJson(Parse(kConfig));
  // snake_case names, enums by name, 64-bit integers as numbers.
  EXPECT_NE(json.find(R"("max_batch_size":8)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("data_type":"TYPE_FP32")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("dims":[16])"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("dims":[-1,16])"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("versions":[1,3])"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("max_queue_delay_microseconds":500)"), std::string::npos) << json;
  // Map keys stay strings; values inside are numbers.
  EXPECT_NE(json.find(R"("priority_queue_policy":{"2":{)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("default_timeout_microseconds":7)"), std::string::npos) << json;
  // Defaults are printed; unset sub-messages are not.
  EXPECT_NE(json.find(R"("runtime":"")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("batch_input":[])"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("is_shape_tensor":false)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("kind":"KIND_CPU","count":2)"), std::string::npos) << json;
  EXPECT_EQ(json.find("sequence_batching"), std::string::npos) << json;
  EXPECT_EQ(json.find(R"("latest")"), std::string::npos) << json;  // the unset oneof member
  // The CUDA graph spec keeps 64-bit integers as strings.
  EXPECT_NE(json.find(R"("dim":["3"])"), std::string::npos) << json;
}

TEST(ModelConfigJson, WithoutASchedulerHasNoDynamicBatchingKey) {
  const std::string json = ModelConfigJson(Parse(R"(name: "m" max_batch_size: 0)"));
  EXPECT_EQ(json.find("dynamic_batching"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("name":"m")"), std::string::npos) << json;
}

}  // namespace
}  // namespace kiln
