// SPDX-License-Identifier: Apache-2.0
// Warmup samples: shapes, data sources (zeros, random, files with raw and string data), batch
// replication, every rule's error, and RunWarmup against a fake model that records requests.
#include "repo/warmup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "repo/repo_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatValues;
using ::kiln::testing::ParseConfigOrDie;
using ::kiln::testing::TempDir;
using ::kiln::testing::WriteFile;
using ::testing::HasSubstr;

constexpr std::string_view kModel = R"(
name: "m" max_batch_size: 4
input [ { name: "F" data_type: TYPE_FP32 dims: [ 2, 2 ] },
        { name: "S" data_type: TYPE_STRING dims: [ 2 ] },
        { name: "B" data_type: TYPE_BOOL dims: [ 3 ] },
        { name: "I" data_type: TYPE_INT64 dims: [ 2 ] } ]
output [ { name: "F" data_type: TYPE_FP32 dims: [ 2, 2 ] } ]
)";

std::string LengthPrefixed(std::initializer_list<std::string_view> items) {
  std::string out;
  for (std::string_view s : items) {
    const uint32_t n = static_cast<uint32_t>(s.size());
    for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>((n >> (8 * b)) & 0xff));
    out += s;
  }
  return out;
}

std::string FloatBytes(std::initializer_list<float> values) {
  std::string out(values.size() * 4, '\0');
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

class WarmupTest : public ::testing::Test {
 protected:
  Result<std::vector<WarmupSample>> Build(std::string_view warmup) {
    return BuildWarmupSamples(ParseConfigOrDie(std::string(kModel) + std::string(warmup)),
                              dir_.path());
  }
  TempDir dir_;
};

TEST_F(WarmupTest, DataSourcesAndBatchReplication) {
  WriteFile(dir_.path() / "warmup" / "f.bin", FloatBytes({1.5f, -2.f, 3.f, 4.25f}));
  WriteFile(dir_.path() / "warmup" / "sub" / "s.bin", LengthPrefixed({"hi", ""}));
  WriteFile(dir_.path() / "warmup" / "b.bin", std::string("\x00\x07\x01", 3));
  Result<std::vector<WarmupSample>> samples = Build(R"(model_warmup [
  { name: "files" batch_size: 3 count: 4
    inputs { key: "F" value: { data_type: TYPE_FP32 dims: [ 2, 2 ] input_data_file: "f.bin" } }
    inputs { key: "S" value: { data_type: TYPE_STRING dims: [ 2 ] input_data_file: "sub/s.bin" } }
    inputs { key: "B" value: { data_type: TYPE_BOOL dims: [ 3 ] input_data_file: "b.bin" } }
    inputs { key: "I" value: { data_type: TYPE_INT64 dims: [ 2 ] zero_data: true } } },
  { batch_size: 1
    inputs { key: "F" value: { data_type: TYPE_FP32 dims: [ 2, 2 ] random_data: true } }
    inputs { key: "S" value: { data_type: TYPE_STRING dims: [ 2 ] random_data: true } }
    inputs { key: "B" value: { data_type: TYPE_BOOL dims: [ 3 ] random_data: true } }
    inputs { key: "I" value: { data_type: TYPE_INT64 dims: [ 2 ] random_data: true } } } ])");
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  ASSERT_EQ(samples->size(), 2u);

  const WarmupSample& files = (*samples)[0];
  EXPECT_EQ(files.name, "files");
  EXPECT_EQ(files.runs, 4);
  ASSERT_EQ(files.request.inputs.size(), 4u);  // model input order
  EXPECT_EQ(files.request.inputs[0].name, "F");
  EXPECT_EQ(files.request.inputs[0].tensor.shape(), (Shape{3, 2, 2}));
  const std::vector<float> item = {1.5f, -2.f, 3.f, 4.25f};
  std::vector<float> want;
  for (int b = 0; b < 3; ++b) want.insert(want.end(), item.begin(), item.end());
  EXPECT_EQ(FloatValues(files.request.inputs[0].tensor), want);
  const OwnedTensor& s = files.request.inputs[1].tensor;
  EXPECT_EQ(s.shape(), (Shape{3, 2}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(s.data<std::string>()[i], i % 2 == 0 ? "hi" : "") << i;
  const OwnedTensor& b = files.request.inputs[2].tensor;
  for (int i = 0; i < 9; ++i) EXPECT_EQ(b.data<bool>()[i], i % 3 != 0) << i;
  const OwnedTensor& z = files.request.inputs[3].tensor;
  EXPECT_EQ(z.shape(), (Shape{3, 2}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(z.data<int64_t>()[i], 0);

  const WarmupSample& random = (*samples)[1];
  EXPECT_EQ(random.name, "#1");
  EXPECT_EQ(random.runs, 1);
  EXPECT_EQ(random.request.inputs[0].tensor.shape(), (Shape{1, 2, 2}));
  for (float v : FloatValues(random.request.inputs[0].tensor)) {
    EXPECT_GE(v, 0.f);
    EXPECT_LT(v, 1.f);
  }
  EXPECT_EQ(random.request.inputs[1].tensor.data<std::string>()[0], "");  // strings: empty
  for (int i = 0; i < 2; ++i) {
    const int64_t v = random.request.inputs[3].tensor.data<int64_t>()[i];
    EXPECT_GE(v, 0);
    EXPECT_LT(v, 100);
  }
}

TEST_F(WarmupTest, NonBatchingModelHasNoBatchDim) {
  Result<std::vector<WarmupSample>> samples = BuildWarmupSamples(
      ParseConfigOrDie(R"(name: "n" input [ { name: "X" data_type: TYPE_INT32 dims: [ 3 ] } ]
      model_warmup [ { inputs { key: "X" value: { data_type: TYPE_INT32 dims: [ 3 ]
                                                  zero_data: true } } } ])"),
      dir_.path());
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  EXPECT_EQ((*samples)[0].request.inputs[0].tensor.shape(), (Shape{3}));
}

TEST_F(WarmupTest, Errors) {
  WriteFile(dir_.path() / "warmup" / "short.bin", FloatBytes({1.f, 2.f}));
  WriteFile(dir_.path() / "warmup" / "bad_strings.bin", LengthPrefixed({"a"}) + "\x09");
  WriteFile(dir_.path() / "secret", "x");
  const std::string good_rest =
      R"(inputs { key: "S" value: { data_type: TYPE_STRING dims: [ 2 ] zero_data: true } }
         inputs { key: "B" value: { data_type: TYPE_BOOL dims: [ 3 ] zero_data: true } }
         inputs { key: "I" value: { data_type: TYPE_INT64 dims: [ 2 ] zero_data: true } })";
  const auto sample = [&](const std::string& batch, const std::string& f) {
    return "model_warmup [ { name: \"w\" " + batch + " inputs { key: \"F\" value: { " + f +
           " } } " + good_rest + " } ]";
  };
  const std::string f_ok = "data_type: TYPE_FP32 dims: [ 2, 2 ] zero_data: true";
  struct Case {
    std::string warmup;
    std::string message;
  };
  const std::vector<Case> cases = {
      {sample("batch_size: 0", f_ok), "batch_size 0 is out of range 1..4"},
      {sample("batch_size: 5", f_ok), "batch_size 5 is out of range 1..4"},
      {sample("batch_size: 1", "data_type: TYPE_FP64 dims: [ 2, 2 ] zero_data: true"),
       "input 'F': data_type TYPE_FP64 does not match the model input's TYPE_FP32"},
      {sample("batch_size: 1", "data_type: TYPE_FP32 dims: [ -1, 2 ] zero_data: true"),
       "input 'F': dims [-1,2] must all be >= 0"},
      {sample("batch_size: 1", "data_type: TYPE_FP32 dims: [ 2, 2 ]"),
       "input 'F': sets none of zero_data, random_data, input_data_file"},
      {sample("batch_size: 1", "data_type: TYPE_FP32 dims: [ 2, 2 ] input_data_file: \"no\""),
       "input 'F': warmup data file"},
      {sample("batch_size: 1",
              "data_type: TYPE_FP32 dims: [ 2, 2 ] input_data_file: \"short.bin\""),
       "input 'F': input_data_file 'short.bin' has 8 bytes; one item of 4 FP32 elements takes 16"},
      {sample("batch_size: 1",
              "data_type: TYPE_FP32 dims: [ 2, 2 ] input_data_file: \"../secret\""),
       "must be a relative path inside the model's warmup/ directory"},
      {sample("batch_size: 1", "data_type: TYPE_FP32 dims: [ 2, 2 ] input_data_file: \"/etc/x\""),
       "must be a relative path inside the model's warmup/ directory"},
      {sample("batch_size: 1",
              "data_type: TYPE_FP32 dims: [ 1000000000, 1000000000 ] zero_data: true"),
       "input 'F'"},
      {"model_warmup [ { batch_size: 1 inputs { key: \"F\" value: { " + f_ok + " } } } ]",
       "model input 'S' has no warmup data"},
      {"model_warmup [ { name: \"w\" batch_size: 1 inputs { key: \"F\" value: { " + f_ok +
           " } } inputs { key: \"Q\" value: { " + f_ok + " } } " + good_rest + " } ]",
       "input 'Q': 'Q' is not an input of the model"},
      {"model_warmup [ { name: \"w\" batch_size: 1 inputs { key: \"F\" value: { " + f_ok +
           " } } inputs { key: \"S\" value: { data_type: TYPE_STRING dims: [ 2 ] "
           "input_data_file: \"bad_strings.bin\" } } "
           "inputs { key: \"B\" value: { data_type: TYPE_BOOL dims: [ 3 ] zero_data: true } } "
           "inputs { key: \"I\" value: { data_type: TYPE_INT64 dims: [ 2 ] zero_data: true } } "
           "} ]",
       "ends inside the length of string element 1 of 2"},
  };
  for (const Case& c : cases) {
    Result<std::vector<WarmupSample>> r = Build(c.warmup);
    ASSERT_FALSE(r.ok()) << c.warmup;
    EXPECT_THAT(r.status().message(), HasSubstr("model 'm': warmup sample '")) << c.warmup;
    EXPECT_THAT(r.status().message(), HasSubstr(c.message)) << c.warmup;
  }
  Result<std::vector<WarmupSample>> nonbatch = BuildWarmupSamples(
      ParseConfigOrDie(R"(name: "n" input [ { name: "X" data_type: TYPE_INT32 dims: [ 3 ] } ]
      model_warmup [ { batch_size: 2 inputs { key: "X" value: { data_type: TYPE_INT32
                                              dims: [ 3 ] zero_data: true } } } ])"),
      dir_.path());
  EXPECT_THAT(nonbatch.status().message(), HasSubstr("batch_size 2 needs a batching model"));
}

// Records the requests it gets; fails the `fail_at`-th one.
class RecordingModel : public LoadedModel {
 public:
  explicit RecordingModel(int fail_at) : fail_at_(fail_at) { signature_.name = "rec"; }
  const std::string& name() const override { return signature_.name; }
  int64_t version() const override { return 7; }
  const ModelSignature& signature() const override { return signature_; }
  void Infer(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink) override {
    ids.push_back(request->id);
    if (static_cast<int>(ids.size()) == fail_at_) {
      sink->Finish(Status::InvalidArgument("input 'F' is wrong"));
    } else {
      sink->Finish(InferResponse{});
    }
  }
  std::vector<std::string> ids;

 private:
  int fail_at_;
  ModelSignature signature_;
};

TEST_F(WarmupTest, RunWarmupRunsEachSampleCountTimesAndStopsAtTheFirstFailure) {
  std::vector<WarmupSample> samples(2);
  samples[0].name = "a";
  samples[0].runs = 3;
  samples[0].request.id = "warmup:a";
  samples[1].name = "b";
  samples[1].runs = 2;
  samples[1].request.id = "warmup:b";

  RecordingModel ok(/*fail_at=*/0);
  EXPECT_TRUE(RunWarmup(ok, samples).ok());
  EXPECT_EQ(ok.ids,
            (std::vector<std::string>{"warmup:a", "warmup:a", "warmup:a", "warmup:b", "warmup:b"}));

  RecordingModel failing(/*fail_at=*/4);
  Status s = RunWarmup(failing, samples);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "warmup sample 'b' failed: input 'F' is wrong");
  EXPECT_EQ(failing.ids.size(), 4u);
}

}  // namespace
}  // namespace kiln
