// SPDX-License-Identifier: Apache-2.0
// The kiln_text and kiln_classify backends: config completion and its errors, and models served
// from a repository: texts batched and padded to the batch's length bucket, top-k classes with
// labels, and an ensemble text -> tokenizer -> a classifier over token ids -> top k. The
// expected ids and classes are worked out by hand (tests/text/wordpiece_reference.py checks the
// tokenizer against transformers.js on a real vocabulary).

#include "repo/builtin_models.h"

#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "graph/onnx/exporter.h"
#include "repo/model_manager.h"
#include "repo/repo_test_util.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::WriteFile;

constexpr std::string_view kVocab =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n,\n!\nun\n##aff\n##able\ngood\nbad\n";

inference::ModelConfig Parse(const std::string& text) {
  inference::ModelConfig c;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &c)) << text;
  return c;
}

std::string Param(const std::string& k, const std::string& v) {
  return "parameters { key: \"" + k + "\" value { string_value: \"" + v + "\" } }\n";
}

TEST(TextModel, CompletesTheConfig) {
  TempDir dir;
  WriteFile(dir.path() / "vocab.txt", kVocab);
  inference::ModelConfig c = Parse("backend: \"kiln_text\"\n" + Param("max_length", "40"));
  Result<std::shared_ptr<Graph>> g = BuildBuiltinModel("tok", dir.path(), &c);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(c.platform(), "kiln_text");
  EXPECT_EQ(c.max_batch_size(), 8);
  ASSERT_EQ(c.input_size(), 1);
  EXPECT_EQ(c.input(0).name(), "TEXT");
  ASSERT_EQ(c.output_size(), 3);
  EXPECT_EQ(c.output(0).name(), "input_ids");
  EXPECT_EQ(c.output(2).name(), "token_type_ids");
  EXPECT_EQ(c.output(1).data_type(), inference::TYPE_INT64);
  ASSERT_EQ((*g)->num_nodes(), 1);
  const Node& n = (*g)->node(0);
  EXPECT_EQ(n.op_type, "WordPieceTokenize");
  // Default buckets: powers of two from 8 below max_length, then max_length.
  EXPECT_THAT(n.GetInts("length_buckets"), ElementsAre(8, 16, 32, 40));
  EXPECT_THAT(FindAttribute(n.attributes, "vocab")->strings, ::testing::SizeIs(14));
}

TEST(TextModel, ErrorsNameTheProblem) {
  TempDir dir;
  WriteFile(dir.path() / "vocab.txt", kVocab);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Param("max_length", "1"), "parameter 'max_length' is '1'"},
      {Param("lowercase", "yes"), "parameter 'lowercase' is 'yes'; expected true or false"},
      {Param("length_buckets", "16,8"), "parameter 'length_buckets' is '16,8'"},
      {Param("vocab_file", "missing.txt"), "cannot read"},
      {Param("vocab_file", "../vocab.txt"), "a path inside the model directory"},
      {"output [ { name: \"ids\" data_type: TYPE_INT64 dims: [ -1 ] } ]\n", "'ids' is not one"},
      {"input [ { name: \"T\" data_type: TYPE_FP32 dims: [ 1 ] } ]\n", "TYPE_STRING"},
  };
  for (const auto& [extra, want] : cases) {
    inference::ModelConfig c = Parse("backend: \"kiln_text\"\n" + extra);
    Result<std::shared_ptr<Graph>> g = BuildBuiltinModel("tok", dir.path(), &c);
    ASSERT_FALSE(g.ok()) << extra;
    EXPECT_THAT(g.status().message(), HasSubstr(want)) << extra;
    EXPECT_THAT(g.status().message(), HasSubstr("model 'tok'")) << extra;
  }
  WriteFile(dir.path() / "vocab.txt", "[UNK]\nhello\n");  // no [CLS]: a load-time error
  inference::ModelConfig c = Parse("backend: \"kiln_text\"\n");
  ASSERT_TRUE(BuildBuiltinModel("tok", dir.path(), &c).ok());  // the kernel checks the tokens
}

TEST(ClassifyModel, CompletesTheConfigAndChecksParameters) {
  TempDir dir;
  inference::ModelConfig c = Parse(
      "backend: \"kiln_classify\"\n"
      "input [ { name: \"scores\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n" +
      Param("k", "3"));
  Result<std::shared_ptr<Graph>> g = BuildBuiltinModel("top", dir.path(), &c);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(c.output_size(), 3);
  EXPECT_EQ(c.output(0).name(), "CLASSES");
  EXPECT_EQ(c.output(0).data_type(), inference::TYPE_STRING);
  EXPECT_EQ(c.output(0).dims(0), 3);
  inference::ModelConfig no_k = Parse("backend: \"kiln_classify\"\n");
  EXPECT_THAT(BuildBuiltinModel("top", dir.path(), &no_k).status().message(),
              HasSubstr("needs parameter 'k'"));
  inference::ModelConfig bad_k = Parse("backend: \"kiln_classify\"\n" + Param("k", "0"));
  EXPECT_THAT(BuildBuiltinModel("top", dir.path(), &bad_k).status().message(),
              HasSubstr("parameter 'k' is '0'"));
  inference::ModelConfig no_labels =
      Parse("backend: \"kiln_classify\"\n" + Param("k", "1") + Param("labels_file", "l.txt"));
  EXPECT_THAT(BuildBuiltinModel("top", dir.path(), &no_labels).status().message(),
              HasSubstr("labels_file"));
}

std::unique_ptr<InferRequest> TextRequest(const std::string& input,
                                          const std::vector<std::string>& texts) {
  auto r = std::make_unique<InferRequest>();
  OwnedTensor t =
      OwnedTensor::Allocate(DataType::kBytes, Shape{static_cast<int64_t>(texts.size()), 1}).value();
  for (size_t i = 0; i < texts.size(); ++i) t.data<std::string>()[i] = texts[i];
  r->inputs.push_back({input, std::move(t)});
  return r;
}

std::vector<int64_t> Ints(const OwnedTensor& t) {
  return {t.data<const int64_t>(), t.data<const int64_t>() + t.num_elements()};
}

const OwnedTensor& Output(const InferResponse& r, std::string_view name) {
  for (const InferOutput& o : r.outputs) {
    if (o.name == name) return o.tensor;
  }
  static const OwnedTensor kNone;
  ADD_FAILURE() << "no output " << name;
  return kNone;
}

struct Served {
  TempDir repo;
  std::unique_ptr<ModelManager> manager;
  std::shared_ptr<LoadedModel> Get(const std::string& name) {
    Result<std::shared_ptr<LoadedModel>> m = manager->GetModel(name, -1);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : nullptr;
  }
  void Start() {
    ModelManagerOptions options;
    options.repository_path = repo.path().string();
    Result<std::unique_ptr<ModelManager>> m = ModelManager::Create(options);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    manager = std::move(m).value();
    ASSERT_TRUE(manager->LoadInitialModels().ok());
  }
};

// An ONNX model: scores [N, 2] = [count of `good` in ids, count of `bad`] for ids INT64 [N, L].
std::string SentimentCounterOnnx(int64_t good, int64_t bad) {
  Graph g;
  g.name = "senti";
  g.opset_imports[""] = 13;
  auto type = [](DataType dt, std::vector<Dim> dims) { return builtin::TensorType(dt, dims); };
  auto constant = [&](const std::string& name, DataType dt, std::vector<int64_t> values) {
    OwnedTensor t = OwnedTensor::Allocate(dt, Shape{static_cast<int64_t>(values.size())}).value();
    for (size_t i = 0; i < values.size(); ++i) t.data<int64_t>()[i] = values[i];
    return g.AddValue({name, type(dt, {Dim{static_cast<int64_t>(values.size()), ""}}), -1,
                       std::make_shared<const OwnedTensor>(std::move(t))});
  };
  const int ids =
      g.AddValue({"ids", type(DataType::kInt64, {Dim{-1, "N"}, Dim{-1, "L"}}), -1, nullptr});
  g.inputs = {ids};
  const int axes = constant("axes", DataType::kInt64, {1});
  std::vector<int> sums;
  for (int64_t word : {good, bad}) {
    const std::string w = std::to_string(word);
    const int c = constant("word" + w, DataType::kInt64, {word});
    auto value = [&](const std::string& n) {
      return g.AddValue({n + w, ValueType{}, -1, nullptr});
    };
    const int eq = value("eq"), f = value("f"), sum = value("sum");
    Node e;
    e.op_type = "Equal";
    e.inputs = {ids, c};
    e.outputs = {eq};
    g.AddNode(std::move(e));
    Node cast;
    cast.op_type = "Cast";
    cast.inputs = {eq};
    cast.outputs = {f};
    cast.attributes.push_back(Attribute::Int("to", 1));  // FLOAT
    g.AddNode(std::move(cast));
    Node r;
    r.op_type = "ReduceSum";
    r.inputs = {f, axes};
    r.outputs = {sum};
    g.AddNode(std::move(r));
    sums.push_back(sum);
  }
  const int scores =
      g.AddValue({"scores", type(DataType::kFloat32, {Dim{-1, "N"}, Dim{2, ""}}), -1, nullptr});
  Node cat;
  cat.op_type = "Concat";
  cat.inputs = sums;
  cat.outputs = {scores};
  cat.attributes.push_back(Attribute::Int("axis", 1));
  g.AddNode(std::move(cat));
  g.outputs = {scores};
  Result<std::string> bytes = ExportOnnxModel(g);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::string();
}

Result<InferResponse> InferNow(LoadedModel& model, std::unique_ptr<InferRequest> r) {
  std::promise<Result<InferResponse>> done;
  model.Infer(std::move(r), [&done](Result<InferResponse> x) { done.set_value(std::move(x)); });
  return done.get_future().get();
}

TEST(TextModel, ServedBatchesPadToTheBucket) {
  Served s;
  WriteFile(s.repo.path() / "tok" / "vocab.txt", kVocab);
  WriteFile(s.repo.path() / "tok" / "config.pbtxt",
            "backend: \"kiln_text\"\nmax_batch_size: 8\n" + Param("max_length", "6") +
                Param("length_buckets", "4,6") +
                "dynamic_batching { max_queue_delay_microseconds: 200000 }\n");
  std::filesystem::create_directories(s.repo.path() / "tok" / "1");
  ASSERT_NO_FATAL_FAILURE(s.Start());
  std::shared_ptr<LoadedModel> tok = s.Get("tok");
  ASSERT_NE(tok, nullptr);
  // Two requests in one batch: the longest row ([CLS] un ##aff ##able , [SEP] = 6) sets the
  // bucket 6 for both; a text over max_length is cut, keeping [SEP].
  std::promise<Result<InferResponse>> a, b;
  tok->Infer(TextRequest("TEXT", {"Hello"}),
             [&a](Result<InferResponse> r) { a.set_value(std::move(r)); });
  tok->Infer(TextRequest("TEXT", {"UNAFFABLE, hello world!"}),
             [&b](Result<InferResponse> r) { b.set_value(std::move(r)); });
  Result<InferResponse> ra = a.get_future().get();
  Result<InferResponse> rb = b.get_future().get();
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  EXPECT_EQ(Output(*ra, "input_ids").shape(), (Shape{1, 6}));
  EXPECT_THAT(Ints(Output(*ra, "input_ids")), ElementsAre(2, 5, 3, 0, 0, 0));
  EXPECT_THAT(Ints(Output(*ra, "attention_mask")), ElementsAre(1, 1, 1, 0, 0, 0));
  EXPECT_THAT(Ints(Output(*rb, "input_ids")), ElementsAre(2, 9, 10, 11, 7, 3));
  EXPECT_THAT(Ints(Output(*rb, "token_type_ids")), ElementsAre(0, 0, 0, 0, 0, 0));
  // Alone, a short text gets the smallest bucket.
  Result<InferResponse> alone = InferNow(*tok, TextRequest("TEXT", {"good"}));
  ASSERT_TRUE(alone.ok());
  EXPECT_THAT(Ints(Output(*alone, "input_ids")), ElementsAre(2, 12, 3, 0));
  // Invalid UTF-8 fails that request, naming the byte.
  Result<InferResponse> bad = InferNow(*tok, TextRequest("TEXT", {"ok \xFF"}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("byte offset 3"));
}

TEST(ClassifyModel, ServedTopKWithLabelsAndSoftmax) {
  Served s;
  WriteFile(s.repo.path() / "top" / "labels.txt", "cat\ndog\nbird\nfish\n");
  WriteFile(s.repo.path() / "top" / "config.pbtxt",
            "backend: \"kiln_classify\"\nmax_batch_size: 4\n"
            "input [ { name: \"INPUT\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n" +
                Param("k", "2") + Param("softmax", "true") + Param("labels_file", "labels.txt"));
  std::filesystem::create_directories(s.repo.path() / "top" / "1");
  ASSERT_NO_FATAL_FAILURE(s.Start());
  std::shared_ptr<LoadedModel> top = s.Get("top");
  ASSERT_NE(top, nullptr);
  auto r = std::make_unique<InferRequest>();
  // logits [0, ln 3, 0, ln 4]: softmax [1, 3, 1, 4] / 9.
  r->inputs.push_back(
      testing::FloatInput("INPUT", {1, 4}, {0.0f, std::log(3.0f), 0.0f, std::log(4.0f)}));
  Result<InferResponse> out = InferNow(*top, std::move(r));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const OwnedTensor& classes = Output(*out, "CLASSES");
  ASSERT_EQ(classes.shape(), (Shape{1, 2}));
  EXPECT_EQ(classes.data<const std::string>()[0], "0.444444:3:fish");
  EXPECT_EQ(classes.data<const std::string>()[1], "0.333333:1:dog");
  EXPECT_THAT(Ints(Output(*out, "INDICES")), ElementsAre(3, 1));
  const OwnedTensor& scores = Output(*out, "SCORES");
  EXPECT_NEAR(scores.data<const float>()[0], 4.0f / 9.0f, 1e-6f);
  EXPECT_NEAR(scores.data<const float>()[1], 3.0f / 9.0f, 1e-6f);
}

// text -> tokenizer -> a "sentiment" model (the count of "good" ids minus "bad" ids, as two
// scores) -> top 1 with labels.
TEST(TextModel, AnEnsembleTurnsASentenceIntoALabel) {
  Served s;
  const auto root = s.repo.path();
  WriteFile(root / "tok" / "vocab.txt", kVocab);
  WriteFile(root / "tok" / "config.pbtxt",
            "backend: \"kiln_text\"\nmax_batch_size: 4\n" + Param("max_length", "16") +
                "output [ { name: \"input_ids\" data_type: TYPE_INT64 dims: [ -1 ] } ]\n");
  std::filesystem::create_directories(root / "tok" / "1");
  // score = [sum(ids == 12), sum(ids == 13)] through ONNX: Equal, Cast, ReduceSum, Concat.
  WriteFile(root / "senti" / "config.pbtxt",
            "max_batch_size: 4\n"
            "input [ { name: \"ids\" data_type: TYPE_INT64 dims: [ -1 ] } ]\n"
            "output [ { name: \"scores\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n");
  WriteFile(root / "senti" / "1" / "model.onnx", SentimentCounterOnnx(12, 13));
  WriteFile(root / "top" / "labels.txt", "positive\nnegative\n");
  WriteFile(root / "top" / "config.pbtxt",
            "backend: \"kiln_classify\"\nmax_batch_size: 4\n"
            "input [ { name: \"INPUT\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
            "output [ { name: \"CLASSES\" data_type: TYPE_STRING dims: [ 1 ] } ]\n" +
                Param("k", "1") + Param("labels_file", "labels.txt"));
  std::filesystem::create_directories(root / "top" / "1");
  WriteFile(root / "sentiment" / "config.pbtxt", R"(platform: "ensemble"
max_batch_size: 4
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "LABEL" data_type: TYPE_STRING dims: [ 1 ] } ]
ensemble_scheduling { step [
  { model_name: "tok" model_version: -1
    input_map { key: "TEXT" value: "TEXT" } output_map { key: "input_ids" value: "ids" } },
  { model_name: "senti" model_version: -1
    input_map { key: "ids" value: "ids" } output_map { key: "scores" value: "scores" } },
  { model_name: "top" model_version: -1
    input_map { key: "INPUT" value: "scores" } output_map { key: "CLASSES" value: "LABEL" } }
] }
)");
  std::filesystem::create_directories(root / "sentiment" / "1");
  ASSERT_NO_FATAL_FAILURE(s.Start());
  std::shared_ptr<LoadedModel> e = s.Get("sentiment");
  ASSERT_NE(e, nullptr);
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {"Good, good world!", "2.000000:0:positive"}, {"bad BAD good", "2.000000:1:negative"}}) {
    Result<InferResponse> r = InferNow(*e, TextRequest("TEXT", {text}));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(Output(*r, "LABEL").data<const std::string>()[0], want) << text;
  }
}

}  // namespace
}  // namespace kiln
