// SPDX-License-Identifier: Apache-2.0
#include "repo/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "repo/repo_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::D;
using ::kiln::testing::IoSpec;
using ::kiln::testing::ParseConfigOrDie;
using ::kiln::testing::SignatureGraph;
using ::kiln::testing::Sym;
using ::kiln::testing::TempDir;
using ::kiln::testing::Unknown;
using ::kiln::testing::WriteFile;
using ::testing::HasSubstr;

// Every message of the config, in the spellings real config.pbtxt files use.
constexpr std::string_view kFullConfig = R"cfg(
# A comment line.
name: "full"   # trailing comment
platform: "onnxruntime_onnx"
backend: "onnxruntime"
runtime: "libkiln.so"
max_batch_size: 8
version_policy: { specific: { versions: [1, 3] } }
input [
  {
    name: "INPUT0"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ -1, 16 ]
    reshape: { shape: [ 16, -1 ] }
    allow_ragged_batch: true
    optional: false
  },
  {
    name: "INPUT1"
    data_type: TYPE_STRING
    dims: 4
    dims: 4
    is_shape_tensor: false
    is_non_linear_format_io: true
  }
]
output {
  name: "OUTPUT0"
  data_type: TYPE_BF16
  dims: [ 16 ]
  label_filename: "labels.txt"
}
batch_input [ { kind: BATCH_ITEM_SHAPE target_name: "T" data_type: TYPE_INT32
                source_input: "INPUT0" } ]
batch_output { target_name: ["OUTPUT0"] kind: BATCH_SCATTER_WITH_INPUT_SHAPE
               source_input: "INPUT0" }
optimization {
  graph { level: 1 }
  priority: PRIORITY_MAX
  cuda {
    graphs: true
    busy_wait_events: true
    graph_spec [ {
      batch_size: 4
      input { key: "INPUT0" value: { dim: [ 4, 16 ] } }
      graph_lower_bound { batch_size: 1 input { key: "INPUT0" value { dim: [1, 16] } } }
    } ]
    output_copy_stream: true
  }
  execution_accelerators {
    cpu_execution_accelerator: [ { name: "openvino" parameters { key: "k" value: "v" } } ]
    gpu_execution_accelerator { name: "tensorrt" }
  }
  input_pinned_memory { enable: true }
  output_pinned_memory: { enable: false }
  gather_kernel_buffer_threshold: 2
  eager_batching: true
}
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
  preserve_ordering: true
  priority_levels: 2
  default_priority_level: 1
  default_queue_policy {
    timeout_action: DELAY default_timeout_microseconds: 5
    allow_timeout_override: true max_queue_size: 3
  }
  priority_queue_policy { key: 1 value: { timeout_action: REJECT } }
}
instance_group [
  {
    name: "g"
    kind: KIND_CPU
    count: 2
    rate_limiter { resources [ { name: "R" global: true count: 2 } ] priority: 1 }
    secondary_devices [ { kind: KIND_NVDLA device_id: 0 } ]
    profile: [ "p" ]
    passive: false
    host_policy: "cpu"
  }
]
default_model_filename: "model.onnx"
cc_model_filenames { key: "7.5" value: "model_75.onnx" }
metric_tags { key: "team" value: "vision" }
parameters { key: "threads" value: { string_value: "4" } }
parameters { key: "kiln.disabled_passes" value: { string_value: "attention_fusion" } }
model_warmup [
  {
    name: "w"
    batch_size: 2
    inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [16] zero_data: true } }
    count: 1
  }
]
model_operations { op_library_filename: "libops.so" }
model_transaction_policy { decoupled: false }
model_repository_agents { agents [ { name: "checksum" parameters { key: "MD5" value: "x" } } ] }
response_cache { enable: true }
model_metrics {
  metric_control [ {
    metric_identifier { family: "nv_inference_first_response_histogram_ms" }
    histogram_options { buckets: [ 1, 2.5, 10 ] }
  } ]
}
)cfg";

TEST(ModelConfigParse, FullConfigWithEveryMessage) {
  inference::ModelConfig c = ParseConfigOrDie(kFullConfig);
  EXPECT_EQ(c.name(), "full");
  EXPECT_EQ(c.max_batch_size(), 8);
  ASSERT_TRUE(c.version_policy().has_specific());
  EXPECT_EQ(c.version_policy().specific().versions_size(), 2);
  ASSERT_EQ(c.input_size(), 2);
  EXPECT_EQ(c.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_EQ(c.input(0).format(), inference::ModelInput::FORMAT_NCHW);
  EXPECT_EQ(std::vector<int64_t>(c.input(0).dims().begin(), c.input(0).dims().end()),
            (std::vector<int64_t>{-1, 16}));
  EXPECT_EQ(c.input(0).reshape().shape_size(), 2);
  EXPECT_EQ(c.input(1).data_type(), inference::TYPE_STRING);
  EXPECT_EQ(c.input(1).dims_size(), 2);
  EXPECT_EQ(c.output(0).data_type(), inference::TYPE_BF16);
  EXPECT_EQ(c.batch_input(0).kind(), inference::BatchInput::BATCH_ITEM_SHAPE);
  EXPECT_EQ(c.optimization().cuda().graph_spec(0).input().at("INPUT0").dim_size(), 2);
  EXPECT_EQ(c.optimization().priority(), inference::ModelOptimizationPolicy::PRIORITY_MAX);
  ASSERT_TRUE(c.has_dynamic_batching());
  EXPECT_EQ(c.dynamic_batching().preferred_batch_size_size(), 2);
  EXPECT_EQ(c.dynamic_batching().default_queue_policy().timeout_action(),
            inference::ModelQueuePolicy::DELAY);
  EXPECT_EQ(c.dynamic_batching().priority_queue_policy().count(1), 1u);
  EXPECT_EQ(c.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_TRUE(c.instance_group(0).rate_limiter().resources(0).global());
  EXPECT_EQ(c.parameters().at("threads").string_value(), "4");
  EXPECT_TRUE(c.model_warmup(0).inputs().at("INPUT0").zero_data());
  EXPECT_TRUE(c.response_cache().enable());
  EXPECT_EQ(c.model_metrics().metric_control(0).histogram_options().buckets_size(), 3);
}

TEST(ModelConfigParse, SequenceAndEnsembleMessages) {
  inference::ModelConfig seq = ParseConfigOrDie(R"cfg(
    name: "seq"
    sequence_batching {
      max_sequence_idle_microseconds: 5000000
      oldest { max_candidate_sequences: 4 preferred_batch_size: [2]
               max_queue_delay_microseconds: 1 }
      control_input [
        { name: "START" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [0, 1] } ] },
        { name: "CORRID" control { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } }
      ]
      state [ {
        input_name: "in" output_name: "out" data_type: TYPE_FP32 dims: [-1]
        initial_state { data_type: TYPE_FP32 dims: [1] zero_data: true name: "init" }
        use_same_buffer_for_input_output: true
      } ]
    })cfg");
  ASSERT_TRUE(seq.has_sequence_batching());
  EXPECT_TRUE(seq.sequence_batching().has_oldest());
  EXPECT_EQ(seq.sequence_batching().control_input(1).control(0).kind(),
            inference::ModelSequenceBatching::Control::CONTROL_SEQUENCE_CORRID);

  inference::ModelConfig ens = ParseConfigOrDie(R"cfg(
    name: "ens" platform: "ensemble"
    ensemble_scheduling { step [ { model_name: "a" model_version: -1
      input_map { key: "IN" value: "RAW" } output_map { key: "OUT" value: "MID" } } ] })cfg");
  EXPECT_EQ(ens.ensemble_scheduling().step(0).input_map().at("IN"), "RAW");
}

TEST(ModelConfigParse, UnknownFieldNamesFieldAndLine) {
  Result<inference::ModelConfig> c =
      ParseModelConfigText("name: \"m\"\n\nmax_batch: 4\n", "m/config.pbtxt");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("m/config.pbtxt:3:"));
  EXPECT_THAT(c.status().message(), HasSubstr("max_batch"));
}

TEST(ModelConfigParse, WrongValueTypeAndUnknownEnum) {
  Result<inference::ModelConfig> c = ParseModelConfigText("max_batch_size: \"eight\"\n", "x.pbtxt");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("x.pbtxt:1:17: Expected integer"));
  EXPECT_THAT(c.status().message(), HasSubstr("in `max_batch_size: \"eight\"`"));

  c = ParseModelConfigText("input { name: \"a\"\n  data_type: TYPE_FLOAT32 }\n", "x.pbtxt");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("x.pbtxt:2:"));
  EXPECT_THAT(c.status().message(), HasSubstr("TYPE_FLOAT32"));

  c = ParseModelConfigText("input { name: \"a\" ", "x.pbtxt");
  EXPECT_FALSE(c.ok());
}

TEST(ModelConfigParse, ReadModelConfigFile) {
  TempDir tmp;
  Result<std::optional<inference::ModelConfig>> none = ReadModelConfigFile(tmp.path() / "m");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());

  WriteFile(tmp.path() / "m" / "config.pbtxt", "name: \"m\" max_batch_size: 2");
  Result<std::optional<inference::ModelConfig>> some = ReadModelConfigFile(tmp.path() / "m");
  ASSERT_TRUE(some.ok());
  ASSERT_TRUE(some->has_value());
  EXPECT_EQ((*some)->max_batch_size(), 2);

  WriteFile(tmp.path() / "bad" / "config.pbtxt", "name: \"bad\"\nbogus: 1\n");
  Result<std::optional<inference::ModelConfig>> bad = ReadModelConfigFile(tmp.path() / "bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("bad/config.pbtxt:2:"));
  EXPECT_THAT(bad.status().message(), HasSubstr("bogus"));
}

TEST(ModelConfigDataType, MatchesKilnNumbering) {
  EXPECT_EQ(FromConfigDataType(inference::TYPE_FP32), DataType::kFloat32);
  EXPECT_EQ(FromConfigDataType(inference::TYPE_STRING), DataType::kBytes);
  EXPECT_EQ(FromConfigDataType(inference::TYPE_BF16), DataType::kBFloat16);
  EXPECT_EQ(FromConfigDataType(inference::TYPE_INVALID), DataType::kInvalid);
  for (int v = 1; v < kNumDataTypes; ++v) {
    const DataType d = static_cast<DataType>(v);
    EXPECT_EQ(inference::DataType_Name(ToConfigDataType(d)), DataTypeConfigName(d));
  }
}

// --- server-side completion ---

TEST(AutoCompleteServerFields, NameAndOnnxPlatform) {
  TempDir tmp;
  WriteFile(tmp.path() / "1" / "model.onnx", "x");
  inference::ModelConfig c;
  ASSERT_TRUE(AutoCompleteServerFields("m", tmp.path() / "1", &c).ok());
  EXPECT_EQ(c.name(), "m");
  EXPECT_EQ(c.platform(), "onnxruntime_onnx");
  EXPECT_EQ(c.backend(), "onnxruntime");
  EXPECT_EQ(c.default_model_filename(), "model.onnx");

  // model.onnx as a directory holding model.onnx.
  WriteFile(tmp.path() / "2" / "model.onnx" / "model.onnx", "x");
  inference::ModelConfig d;
  EXPECT_TRUE(AutoCompleteServerFields("m", tmp.path() / "2", &d).ok());

  inference::ModelConfig e = ParseConfigOrDie("backend: \"onnxruntime\"");
  ASSERT_TRUE(AutoCompleteServerFields("m", {}, &e).ok());
  EXPECT_EQ(e.platform(), "onnxruntime_onnx");
  inference::ModelConfig f = ParseConfigOrDie("platform: \"onnxruntime_onnx\"");
  ASSERT_TRUE(AutoCompleteServerFields("m", {}, &f).ok());
  EXPECT_EQ(f.backend(), "onnxruntime");
}

TEST(AutoCompleteServerFields, Errors) {
  TempDir tmp;
  inference::ModelConfig named = ParseConfigOrDie("name: \"other\"");
  Status s = AutoCompleteServerFields("m", tmp.path(), &named);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'other'"));
  EXPECT_THAT(s.message(), HasSubstr("'m'"));

  inference::ModelConfig empty;
  s = AutoCompleteServerFields("m", tmp.path(), &empty);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("model.onnx"));

  inference::ModelConfig trt = ParseConfigOrDie("platform: \"tensorrt_plan\"");
  s = AutoCompleteServerFields("m", tmp.path(), &trt);
  EXPECT_THAT(s.message(), HasSubstr("'tensorrt_plan'"));
  EXPECT_THAT(s.message(), HasSubstr("not supported"));
}

// --- graph completion ---

std::shared_ptr<Graph> BatchableGraph() {
  return SignatureGraph({{"x", DataType::kFloat32, {Sym("batch"), D(3), Unknown()}}},
                        {{"y", DataType::kInt64, {Unknown(), D(10)}}});
}

TEST(AutoCompleteFromGraph, BatchableModelGetsDefaultMaxBatchSize) {
  auto g = BatchableGraph();
  EXPECT_TRUE(GraphSupportsBatching(*g));
  inference::ModelConfig c = ParseConfigOrDie("name: \"m\"");
  ASSERT_TRUE(AutoCompleteFromGraph(*g, kDefaultMaxBatchSize, &c).ok());
  EXPECT_EQ(c.max_batch_size(), 4);
  ASSERT_EQ(c.input_size(), 1);
  EXPECT_EQ(c.input(0).name(), "x");
  EXPECT_EQ(c.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_EQ(DimsToString(std::vector<int64_t>(c.input(0).dims().begin(), c.input(0).dims().end())),
            "[3,-1]");
  ASSERT_EQ(c.output_size(), 1);
  EXPECT_EQ(c.output(0).data_type(), inference::TYPE_INT64);
  EXPECT_EQ(c.output(0).dims_size(), 1);
  EXPECT_EQ(c.output(0).dims(0), 10);
  ASSERT_TRUE(c.has_dynamic_batching());  // the reference backend's default scheduler
  EXPECT_EQ(c.dynamic_batching().preferred_batch_size_size(), 1);
  EXPECT_EQ(c.dynamic_batching().preferred_batch_size(0), 4);
  EXPECT_EQ(c.dynamic_batching().max_queue_delay_microseconds(), 0u);
  EXPECT_TRUE(ValidateConfigAgainstGraph(c, *g).ok());
}

TEST(AutoCompleteFromGraph, ConfiguredMaxBatchSizeKept) {
  auto g = BatchableGraph();
  inference::ModelConfig c = ParseConfigOrDie("name: \"m\" max_batch_size: 16");
  ASSERT_TRUE(AutoCompleteFromGraph(*g, 4, &c).ok());
  EXPECT_EQ(c.max_batch_size(), 16);
}

TEST(AutoCompleteFromGraph, FixedFirstDimIsNotBatchable) {
  auto g = SignatureGraph({{"x", DataType::kFloat32, {D(1), D(3)}}},
                          {{"y", DataType::kFloat32, {Sym("n"), D(3)}}});
  EXPECT_FALSE(GraphSupportsBatching(*g));
  inference::ModelConfig c = ParseConfigOrDie("name: \"m\"");
  ASSERT_TRUE(AutoCompleteFromGraph(*g, 4, &c).ok());
  EXPECT_EQ(c.max_batch_size(), 0);
  EXPECT_EQ(c.input(0).dims_size(), 2);
  EXPECT_EQ(c.output(0).dims(0), -1);

  inference::ModelConfig bad = ParseConfigOrDie("name: \"m\" max_batch_size: 8");
  Status s = AutoCompleteFromGraph(*g, 4, &bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("max_batch_size is 8"));
  EXPECT_THAT(s.message(), HasSubstr("'m'"));
}

TEST(AutoCompleteFromGraph, ScalarAndRankZeroBecomeDimsOneWithReshape) {
  auto g = SignatureGraph({{"x", DataType::kFloat32, {Sym("batch")}}},
                          {{"y", DataType::kFloat32, {Sym("batch")}}});
  inference::ModelConfig c = ParseConfigOrDie("name: \"m\"");
  ASSERT_TRUE(AutoCompleteFromGraph(*g, 4, &c).ok());
  EXPECT_EQ(c.max_batch_size(), 4);
  ASSERT_EQ(c.input(0).dims_size(), 1);
  EXPECT_EQ(c.input(0).dims(0), 1);
  EXPECT_TRUE(c.input(0).has_reshape());
  EXPECT_EQ(c.input(0).reshape().shape_size(), 0);
  EXPECT_TRUE(ValidateModelConfig(c).ok());
  EXPECT_TRUE(ValidateConfigAgainstGraph(c, *g).ok());

  auto scalar = SignatureGraph({{"s", DataType::kInt32, {}}}, {{"t", DataType::kInt32, {}}});
  inference::ModelConfig d = ParseConfigOrDie("name: \"m\"");
  ASSERT_TRUE(AutoCompleteFromGraph(*scalar, 4, &d).ok());
  EXPECT_EQ(d.max_batch_size(), 0);
  EXPECT_EQ(d.input(0).dims(0), 1);
  EXPECT_TRUE(ValidateConfigAgainstGraph(d, *scalar).ok());
}

TEST(AutoCompleteFromGraph, CompleteConfigIsLeftAlone) {
  auto g = BatchableGraph();
  inference::ModelConfig c = ParseConfigOrDie(R"cfg(
    name: "m" input { name: "x" data_type: TYPE_FP32 dims: [1, 3, 5] }
    output { name: "y" data_type: TYPE_INT64 dims: [1, 10] })cfg");
  const std::string before = c.DebugString();
  ASSERT_TRUE(AutoCompleteFromGraph(*g, 4, &c).ok());
  EXPECT_EQ(c.DebugString(), before);
}

TEST(AutoCompleteFromGraph, PartialConfigFilled) {
  auto g = BatchableGraph();
  inference::ModelConfig c = ParseConfigOrDie(R"cfg(name: "m" input { name: "x" })cfg");
  ASSERT_TRUE(AutoCompleteFromGraph(*g, 4, &c).ok());
  EXPECT_EQ(c.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_EQ(c.input(0).dims_size(), 2);
  EXPECT_EQ(c.output_size(), 1);
}

TEST(AutoCompleteFromGraph, UnknownShapeOrTypeIsAnError) {
  auto g = SignatureGraph({{"x", DataType::kFloat32, {}, /*has_shape=*/false}},
                          {{"y", DataType::kFloat32, {Sym("b")}}});
  inference::ModelConfig c = ParseConfigOrDie("name: \"m\"");
  Status s = AutoCompleteFromGraph(*g, 4, &c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input 'x'"));

  auto h = SignatureGraph({{"x", DataType::kInvalid, {Sym("b")}}},
                          {{"y", DataType::kFloat32, {Sym("b")}}});
  inference::ModelConfig d = ParseConfigOrDie("name: \"m\"");
  s = AutoCompleteFromGraph(*h, 4, &d);
  EXPECT_THAT(s.message(), HasSubstr("datatype of input 'x'"));
}

// --- normalization and validation ---

TEST(NormalizeModelConfig, Defaults) {
  inference::ModelConfig c = ParseConfigOrDie("name: \"m\"");
  ASSERT_TRUE(NormalizeModelConfig(&c).ok());
  EXPECT_EQ(c.version_policy().latest().num_versions(), 1u);
  ASSERT_EQ(c.instance_group_size(), 1);
  EXPECT_EQ(c.instance_group(0).name(), "m");
  EXPECT_EQ(c.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(c.instance_group(0).count(), 1);

  inference::ModelConfig d = ParseConfigOrDie(
      "name: \"m\" version_policy { all {} } instance_group [ {}, { name: \"x\" "
      "count: 3 } ]");
  ASSERT_TRUE(NormalizeModelConfig(&d).ok());
  EXPECT_TRUE(d.version_policy().has_all());
  EXPECT_EQ(d.instance_group(0).name(), "m_0");
  EXPECT_EQ(d.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(d.instance_group(0).count(), 1);
  EXPECT_EQ(d.instance_group(1).name(), "x");
  EXPECT_EQ(d.instance_group(1).count(), 3);
}

constexpr std::string_view kValidBase = R"cfg(
  name: "m"
  input { name: "x" data_type: TYPE_FP32 dims: [3, -1] }
  output { name: "y" data_type: TYPE_INT64 dims: [10] }
)cfg";

Status ValidateWith(std::string_view extra) {
  inference::ModelConfig c = ParseConfigOrDie(std::string(kValidBase) + std::string(extra));
  return ValidateModelConfig(c);
}

TEST(ValidateModelConfig, Errors) {
  EXPECT_TRUE(ValidateWith("").ok());
  struct Case {
    std::string_view extra;
    std::string_view message;
  };
  const Case cases[] = {
      {"max_batch_size: -1", "max_batch_size must be >= 0"},
      {"input { name: \"x\" data_type: TYPE_FP32 }", "input 'x' is listed more than once"},
      {"input { name: \"z\" }", "input 'z' has no valid data_type"},
      {"input { data_type: TYPE_FP32 }", "has no name"},
      {"output { name: \"o\" data_type: TYPE_FP32 dims: [-2] }", "output 'o': dims [-2]"},
      {"input { name: \"r\" data_type: TYPE_FP32 dims: [4] reshape { shape: [3] } }",
       "reshape [3] is not compatible with dims [4]"},
      {"version_policy { latest { } }", "num_versions >= 1"},
      {"version_policy { specific { } }", "specific lists no versions"},
      {"instance_group { name: \"g\" kind: KIND_GPU gpus: [-1] }", "GPUs are numbered from 0"},
      {"instance_group { name: \"g\" kind: KIND_CPU gpus: [0] }", "must not list gpus"},
      {"instance_group { name: \"g\" count: -2 }", "count must be >= 1"},
      // Ensembles are checked by their own rules (repo/ensemble.h; ensemble_test.cc has the
      // table).
      {"platform: \"ensemble\"", "ensemble 'm': platform 'ensemble' needs ensemble_scheduling"},
      {"ensemble_scheduling { }", "model 'm': ensemble_scheduling is set, but the platform is ''"},
      {"platform: \"ensemble\" instance_group { name: \"g\" count: 1 } ensemble_scheduling { "
       "step [ { model_name: \"a\" input_map { key: \"i\" value: \"x\" } output_map { key: "
       "\"o\" value: \"y\" } } ] }",
       "ensemble 'm': instance_group is not allowed on an ensemble"},
  };
  for (const Case& c : cases) {
    Status s = ValidateWith(c.extra);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.extra;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.extra;
    EXPECT_THAT(s.message(), HasSubstr("'m'")) << c.extra;
  }
  inference::ModelConfig no_io = ParseConfigOrDie("name: \"m\"");
  EXPECT_THAT(ValidateModelConfig(no_io).message(), HasSubstr("no inputs"));
}

TEST(ValidateConfigAgainstGraph, Mismatches) {
  auto g = SignatureGraph({{"x", DataType::kFloat32, {Sym("batch"), D(3), Unknown()}}},
                          {{"y", DataType::kInt64, {Unknown(), D(10)}}});
  struct Case {
    std::string_view config;
    std::string_view message;  // empty: valid
  };
  const Case cases[] = {
      {R"cfg(max_batch_size: 4 input { name: "x" data_type: TYPE_FP32 dims: [3, -1] }
            output { name: "y" data_type: TYPE_INT64 dims: [10] })cfg",
       ""},
      // Config stricter than the model, and -1 against a known dim: both accepted.
      {R"cfg(max_batch_size: 4 input { name: "x" data_type: TYPE_FP32 dims: [-1, 7] }
            output { name: "y" data_type: TYPE_INT64 dims: [10] })cfg",
       ""},
      // Reshape: the model sees [batch, 3, 5].
      {R"cfg(max_batch_size: 4 input { name: "x" data_type: TYPE_FP32 dims: [15]
                                      reshape { shape: [3, 5] } }
            output { name: "y" data_type: TYPE_INT64 dims: [10] })cfg",
       ""},
      {R"cfg(max_batch_size: 4 input { name: "x" data_type: TYPE_FP16 dims: [3, -1] }
            output { name: "y" data_type: TYPE_INT64 dims: [10] })cfg",
       "input 'x': config data_type TYPE_FP16 does not match the model's TYPE_FP32"},
      {R"cfg(max_batch_size: 4 input { name: "x" data_type: TYPE_FP32 dims: [3] }
            output { name: "y" data_type: TYPE_INT64 dims: [10] })cfg",
       "input 'x': rank differs: config shape [-1,3] (max_batch_size 4, batch dim first) vs "
       "model shape [batch,3,?]"},
      {R"cfg(max_batch_size: 4 input { name: "x" data_type: TYPE_FP32 dims: [4, -1] }
            output { name: "y" data_type: TYPE_INT64 dims: [10] })cfg",
       "input 'x': dim 1 differs"},
      {R"cfg(max_batch_size: 0 input { name: "x" data_type: TYPE_FP32 dims: [2, 3, -1] }
            output { name: "y" data_type: TYPE_INT64 dims: [2, 11] })cfg",
       "output 'y': dim 1 differs"},
      {R"cfg(max_batch_size: 4 input { name: "x" data_type: TYPE_FP32 dims: [3, -1] }
            input { name: "extra" data_type: TYPE_FP32 dims: [1] }
            output { name: "y" data_type: TYPE_INT64 dims: [10] })cfg",
       "config input 'extra' is not an input of the model (model inputs: 'x')"},
      {R"cfg(max_batch_size: 4 output { name: "y" data_type: TYPE_INT64 dims: [10] })cfg",
       "model input 'x' is missing from the config's inputs"},
      {R"cfg(max_batch_size: 4 input { name: "x" data_type: TYPE_FP32 dims: [3, -1] }
            output { name: "z" data_type: TYPE_INT64 dims: [10] })cfg",
       "config output 'z' is not an output of the model (model outputs: 'y')"},
  };
  for (const Case& c : cases) {
    inference::ModelConfig config = ParseConfigOrDie("name: \"m\" " + std::string(c.config));
    Status s = ValidateConfigAgainstGraph(config, *g);
    if (c.message.empty()) {
      EXPECT_TRUE(s.ok()) << c.config << " -> " << s.ToString();
    } else {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.config;
      EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.config;
      EXPECT_THAT(s.message(), HasSubstr("model 'm'")) << c.config;
    }
  }
}

TEST(ValidateConfigAgainstGraph, BatchingNeedsDynamicFirstDim) {
  auto g = SignatureGraph({{"x", DataType::kFloat32, {D(1), D(3)}}},
                          {{"y", DataType::kFloat32, {D(1), D(3)}}});
  inference::ModelConfig c = ParseConfigOrDie(R"cfg(
    name: "m" max_batch_size: 2 input { name: "x" data_type: TYPE_FP32 dims: [3] }
    output { name: "y" data_type: TYPE_FP32 dims: [3] })cfg");
  Status s = ValidateConfigAgainstGraph(c, *g);
  EXPECT_THAT(s.message(), HasSubstr("max_batch_size 2 needs a dynamic first (batch) dim"));
}

TEST(UnimplementedConfigFields, NamesEachOnce) {
  EXPECT_TRUE(UnimplementedConfigFields(ParseConfigOrDie(kValidBase)).empty());
  inference::ModelConfig base = ParseConfigOrDie(kValidBase);
  ASSERT_TRUE(NormalizeModelConfig(&base).ok());
  EXPECT_TRUE(UnimplementedConfigFields(base).empty());

  std::vector<std::string> f = UnimplementedConfigFields(ParseConfigOrDie(kFullConfig));
  for (std::string_view want :
       {"optimization.priority", "optimization.cuda", "optimization.execution_accelerators",
        "instance_group.rate_limiter", "batch_input", "batch_output", "parameters.threads",
        "model_metrics"}) {
    EXPECT_EQ(std::count(f.begin(), f.end(), want), 1) << want;
  }
  // Acted on by the scheduler and the instances.
  for (std::string_view done :
       {"dynamic_batching", "instance_group.count", "input.allow_ragged_batch", "response_cache",
        "output.label_filename", "optimization", "optimization.graph", "parameters",
        "parameters.kiln.disabled_passes", "instance_group (more than one group)"}) {
    EXPECT_EQ(std::count(f.begin(), f.end(), done), 0) << done;
  }
}

TEST(MakeModelSignature, PlainView) {
  inference::ModelConfig c = ParseConfigOrDie(std::string(kValidBase) +
                                              "platform: \"onnxruntime_onnx\" backend: "
                                              "\"onnxruntime\"");
  ModelSignature sig = MakeModelSignature(c);
  EXPECT_EQ(sig.name, "m");
  EXPECT_EQ(sig.platform, "onnxruntime_onnx");
  EXPECT_EQ(sig.backend, "onnxruntime");
  EXPECT_EQ(sig.max_batch_size, 0);
  ASSERT_EQ(sig.inputs.size(), 1u);
  EXPECT_EQ(sig.inputs[0].name, "x");
  EXPECT_EQ(sig.inputs[0].dtype, DataType::kFloat32);
  EXPECT_EQ(sig.inputs[0].dims, (std::vector<int64_t>{3, -1}));
  ASSERT_EQ(sig.outputs.size(), 1u);
  EXPECT_EQ(sig.outputs[0].dtype, DataType::kInt64);
  EXPECT_EQ(sig.outputs[0].dims, (std::vector<int64_t>{10}));
}

TEST(MapReshape, BothDirections) {
  using V = std::vector<int64_t>;
  Result<V> r = MapReshape(V{1}, V{1}, V{});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
  r = MapReshape(V{}, V{}, V{1});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, V{1});
  r = MapReshape(V{-1, 6}, V{5, 6}, V{3, -1, 2});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (V{3, 5, 2}));
  EXPECT_FALSE(MapReshape(V{4}, V{4}, V{3}).ok());
  EXPECT_FALSE(MapReshape(V{-1}, V{4}, V{2, 2}).ok());
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(GraphOptimizationFromConfig, LevelsAndDisabledPasses) {
  Result<GraphOptimizationConfig> g = GraphOptimizationFromConfig(ParseConfigOrDie(kValidBase));
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->enabled);
  EXPECT_TRUE(g->disabled_passes.empty());

  inference::ModelConfig c = ParseConfigOrDie(kValidBase);
  c.mutable_optimization()->mutable_graph()->set_level(-1);
  (*c.mutable_parameters())["kiln.disabled_passes"].set_string_value(" a ,b,c");
  g = GraphOptimizationFromConfig(c);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_FALSE(g->enabled);
  EXPECT_EQ(g->disabled_passes, (std::vector<std::string>{"a", "b", "c"}));

  c.mutable_optimization()->mutable_graph()->set_level(-2);
  g = GraphOptimizationFromConfig(c);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("optimization.graph.level must be -1"));
  EXPECT_THAT(g.status().message(), HasSubstr("got -2"));
}

TEST(IntraOpThreadsFromConfig, KilnAndOnnxRuntimeKeys) {
  const auto threads = [](std::map<std::string, std::string> params) {
    inference::ModelConfig c = ParseConfigOrDie(kValidBase);
    for (const auto& [k, v] : params) (*c.mutable_parameters())[k].set_string_value(v);
    return IntraOpThreadsFromConfig(c);
  };
  EXPECT_EQ(*threads({}), 0);
  EXPECT_EQ(*threads({{"kiln.intra_op_threads", "4"}}), 4);
  EXPECT_EQ(*threads({{"intra_op_thread_count", "3"}}), 3);
  EXPECT_EQ(*threads({{"intra_op_thread_count", "0"}}), 0);  // ONNX Runtime's default
  EXPECT_EQ(*threads({{"kiln.intra_op_threads", "2"}, {"intra_op_thread_count", "2"}}), 2);
  EXPECT_THAT(
      threads({{"kiln.intra_op_threads", "2"}, {"intra_op_thread_count", "3"}}).status().message(),
      HasSubstr("disagree"));
  EXPECT_THAT(threads({{"kiln.intra_op_threads", "0"}}).status().message(),
              HasSubstr("must be a thread count from 1 to 1024, got '0'"));
  EXPECT_THAT(threads({{"kiln.intra_op_threads", "two"}}).status().message(),
              HasSubstr("got 'two'"));
  EXPECT_THAT(threads({{"intra_op_thread_count", "2000"}}).status().message(),
              HasSubstr("from 0 to 1024"));
  // Both keys are acted on: no "not acted on" warning names them.
  inference::ModelConfig c = ParseConfigOrDie(kValidBase);
  (*c.mutable_parameters())["kiln.intra_op_threads"].set_string_value("2");
  (*c.mutable_parameters())["intra_op_thread_count"].set_string_value("2");
  EXPECT_TRUE(UnimplementedConfigFields(c).empty());
}

}  // namespace
}  // namespace kiln
