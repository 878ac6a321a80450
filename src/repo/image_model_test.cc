// SPDX-License-Identifier: Apache-2.0
// The kiln_image backend: config completion and its errors, and a model served from a repository
// (no model file) turning PNG bytes into normalized tensors, batched, with a bad upload failing
// only its own request.

#include "repo/image_model.h"

#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "repo/model_config.h"
#include "repo/model_manager.h"
#include "repo/repo_test_util.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::WriteFile;

inference::ModelConfig Parse(const std::string& text) {
  inference::ModelConfig c;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &c)) << text;
  return c;
}

std::string Params(const std::vector<std::pair<std::string, std::string>>& kv) {
  std::string t = "backend: \"kiln_image\"\n";
  for (const auto& [k, v] : kv) {
    t += "parameters { key: \"" + k + "\" value { string_value: \"" + v + "\" } }\n";
  }
  return t;
}

TEST(ImageModel, CompletesTheConfigAndBuildsOneNode) {
  inference::ModelConfig c = Parse(Params({{"resize", "256"},
                                           {"crop", "224,224"},
                                           {"mean", "0.485,0.456,0.406"},
                                           {"std", "0.229,0.224,0.225"}}));
  Result<std::shared_ptr<Graph>> g = BuildImageModel("pre", &c);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(c.name(), "pre");
  EXPECT_EQ(c.platform(), "kiln_image");
  EXPECT_EQ(c.max_batch_size(), kDefaultImageMaxBatchSize);
  ASSERT_EQ(c.input_size(), 1);
  EXPECT_EQ(c.input(0).name(), "IMAGE");
  EXPECT_EQ(c.input(0).data_type(), inference::TYPE_STRING);
  ASSERT_EQ(c.output_size(), 1);
  EXPECT_EQ(std::vector<int64_t>(c.output(0).dims().begin(), c.output(0).dims().end()),
            (std::vector<int64_t>{3, 224, 224}));
  ASSERT_EQ((*g)->num_nodes(), 1);
  EXPECT_EQ((*g)->node(0).op_type, "ImagePreprocess");
  EXPECT_TRUE(UnimplementedConfigFields(c).empty()) << "the image parameters are acted on";
  // A flat output through reshape.
  inference::ModelConfig flat = Parse(Params({{"resize", "8,8"}, {"color", "GRAY"}}) +
                                      "output { name: \"pixels\" data_type: TYPE_FP32 dims: [ 64 ] "
                                      "reshape { shape: [ 1, 8, 8 ] } }");
  EXPECT_TRUE(BuildImageModel("pre", &flat).ok());
  // Without a fixed size the spatial dims are -1.
  inference::ModelConfig free = Parse(Params({{"resize", "64"}, {"color", "GRAY"}}));
  ASSERT_TRUE(BuildImageModel("pre", &free).ok());
  EXPECT_EQ(std::vector<int64_t>(free.output(0).dims().begin(), free.output(0).dims().end()),
            (std::vector<int64_t>{1, -1, -1}));
}

TEST(ImageModel, ParameterErrorsNameTheParameter) {
  struct Case {
    std::vector<std::pair<std::string, std::string>> params;
    std::string extra, message;
  };
  const Case cases[] = {
      {{{"color", "CMYK"}}, "", "parameter 'color' is 'CMYK'; expected RGB or GRAY"},
      {{{"resize", "a,b"}}, "", "parameter 'resize' is 'a,b'"},
      {{{"resize", "1,2,3"}}, "", "parameter 'resize' is '1,2,3'"},
      {{{"crop", "224"}}, "", "parameter 'crop' is '224'"},
      {{{"filter", "lanczos"}}, "", "parameter 'filter' is 'lanczos'"},
      {{{"mean", "0.5,0.5"}, {"std", "1,1"}}, "", "take 1 or 3 values (color RGB), got 2"},
      {{{"mean", "0.5"}}, "", "'mean' and 'std' are given together"},
      {{{"max_pixels", "0"}}, "", "parameter 'max_pixels' is '0'"},
      {{{"crop", "8,8"}},
       "output { name: \"o\" data_type: TYPE_FP32 dims: [ 3, 4, 4 ] }",
       "one output of TYPE_FP32 with dims (or reshape) [3, 8, 8]"},
      {{},
       "input { name: \"i\" data_type: TYPE_FP32 dims: [ 1 ] }",
       "one input of TYPE_STRING with dims [1]"},
  };
  for (const Case& c : cases) {
    inference::ModelConfig config = Parse(Params(c.params) + c.extra);
    Result<std::shared_ptr<Graph>> g = BuildImageModel("pre", &config);
    ASSERT_FALSE(g.ok()) << c.message;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(), HasSubstr(c.message));
    EXPECT_THAT(g.status().message(), HasSubstr("model 'pre'"));
  }
}

// A `size` x `size` gray PNG with every pixel `value` (libpng's simplified writer).
std::string UniformPng(int size, uint8_t value) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(size);
  img.height = static_cast<png_uint_32>(size);
  img.format = PNG_FORMAT_GRAY;
  const std::vector<uint8_t> pixels(static_cast<size_t>(size * size), value);
  png_alloc_size_t bytes = 0;
  EXPECT_TRUE(png_image_write_to_memory(&img, nullptr, &bytes, 0, pixels.data(), 0, nullptr));
  std::string out(bytes, '\0');
  EXPECT_TRUE(png_image_write_to_memory(&img, out.data(), &bytes, 0, pixels.data(), 0, nullptr));
  out.resize(bytes);
  return out;
}

std::unique_ptr<InferRequest> ImageRequest(const std::string& bytes) {
  auto r = std::make_unique<InferRequest>();
  OwnedTensor t = OwnedTensor::Allocate(DataType::kBytes, Shape{1, 1}).value();
  t.data<std::string>()[0] = bytes;
  r->inputs.push_back({"IMAGE", std::move(t)});
  return r;
}

TEST(ImageModel, ServedFromARepositoryBatchedAndBadUploadsFailAlone) {
  TempDir repo;
  WriteFile(repo.path() / "pre" / "config.pbtxt",
            Params({{"resize", "8,8"}, {"color", "GRAY"}, {"mean", "0.5"}, {"std", "0.25"}}) +
                "dynamic_batching { max_queue_delay_microseconds: 20000 }\n");
  std::filesystem::create_directories(repo.path() / "pre" / "1");
  ModelManagerOptions options;
  options.repository_path = repo.path().string();
  Result<std::unique_ptr<ModelManager>> manager = ModelManager::Create(options);
  ASSERT_TRUE(manager.ok()) << manager.status().ToString();
  ASSERT_TRUE((*manager)->LoadInitialModels().ok());
  Result<std::shared_ptr<LoadedModel>> model = (*manager)->GetModel("pre", -1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  // Uniform images of several sizes and values, and one upload that is not an image, at once.
  const std::vector<std::pair<int, int>> images = {{16, 200}, {8, 0}, {40, 255}, {0, 0}, {9, 51}};
  std::vector<std::promise<Result<InferResponse>>> done(images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string bytes =
        images[i].first == 0 ? std::string("not an image")
                             : UniformPng(images[i].first, static_cast<uint8_t>(images[i].second));
    (*model)->Infer(ImageRequest(bytes),
                    [&done, i](Result<InferResponse> r) { done[i].set_value(std::move(r)); });
  }
  for (size_t i = 0; i < images.size(); ++i) {
    Result<InferResponse> r = done[i].get_future().get();
    if (images[i].first == 0) {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      EXPECT_THAT(r.status().message(), HasSubstr("not a JPEG or PNG image"));
      continue;
    }
    ASSERT_TRUE(r.ok()) << i << ": " << r.status().ToString();
    const OwnedTensor& y = r->outputs[0].tensor;
    ASSERT_EQ(y.shape(), (Shape{1, 1, 8, 8}));
    // A uniform image stays uniform through any resize: (v / 255 - 0.5) / 0.25 everywhere.
    const float want = (static_cast<float>(images[i].second) / 255.0f - 0.5f) / 0.25f;
    for (int64_t k = 0; k < y.num_elements(); ++k) {
      ASSERT_FLOAT_EQ(y.data<const float>()[k], want) << i << " element " << k;
    }
  }
}

}  // namespace
}  // namespace kiln
