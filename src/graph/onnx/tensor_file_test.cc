// SPDX-License-Identifier: Apache-2.0
// Tests for tensor files: both formats by extension, errors naming the path, and reading the
// ONNX backend test data.

#include "graph/onnx/tensor_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace kiln {
namespace {

namespace fs = std::filesystem;

class TensorFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kiln_tensor_file_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(std::string_view name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

OwnedTensor Iota(DataType dtype, const Shape& shape) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(dtype, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  auto* p = static_cast<unsigned char*>(t->raw_data());
  for (size_t i = 0; i < t->size_bytes(); ++i) p[i] = static_cast<unsigned char>(i * 7 + 1);
  return std::move(t).value();
}

TEST_F(TensorFileTest, RoundTripsBothFormats) {
  const OwnedTensor t = Iota(DataType::kFloat32, Shape{2, 3});
  for (const char* file : {"a.pb", "a.npy", "UPPER.NPY", "upper.PB"}) {
    ASSERT_TRUE(WriteTensorFile(Path(file), t.view(), "logits").ok()) << file;
    std::string name = "stale";
    Result<OwnedTensor> back = ReadTensorFile(Path(file), &name);
    ASSERT_TRUE(back.ok()) << file << ": " << back.status().ToString();
    EXPECT_EQ(back->shape(), t.shape());
    EXPECT_EQ(std::memcmp(back->raw_data(), t.raw_data(), t.size_bytes()), 0) << file;
    const bool npy =
        std::string_view(file).ends_with("npy") || std::string_view(file).ends_with("NPY");
    EXPECT_EQ(name, npy ? "" : "logits") << file;
  }
  // The .npy file is exactly what ReadNpy/WriteNpy agree on: check the magic on disk.
  std::ifstream in(Path("a.npy"), std::ios::binary);
  char magic[6];
  in.read(magic, 6);
  EXPECT_EQ(std::string(magic, 6), std::string("\x93NUMPY", 6));
}

TEST_F(TensorFileTest, BytesAndBf16GoOnlyToPb) {
  Result<OwnedTensor> s = OwnedTensor::Allocate(DataType::kBytes, Shape{2});
  ASSERT_TRUE(s.ok());
  s->data<std::string>()[1] = "hello";
  ASSERT_TRUE(WriteTensorFile(Path("s.pb"), s->view(), "s").ok());
  Result<OwnedTensor> back = ReadTensorFile(Path("s.pb"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->data<std::string>()[1], "hello");
  Status npy = WriteTensorFile(Path("s.npy"), s->view(), "s");
  EXPECT_EQ(npy.code(), StatusCode::kUnimplemented) << npy.ToString();
  EXPECT_NE(npy.message().find(Path("s.npy")), std::string::npos) << npy.ToString();
  EXPECT_FALSE(fs::exists(Path("s.npy")));
}

TEST_F(TensorFileTest, ErrorsNameThePath) {
  const OwnedTensor t = Iota(DataType::kInt32, Shape{4});
  Status bad_ext = WriteTensorFile(Path("a.txt"), t.view(), "x");
  EXPECT_EQ(bad_ext.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_ext.message().find("a.txt"), std::string::npos);
  EXPECT_NE(bad_ext.message().find(".pb"), std::string::npos);
  EXPECT_NE(bad_ext.message().find(".npy"), std::string::npos);
  Result<OwnedTensor> no_ext = ReadTensorFile(Path("noext"));
  EXPECT_EQ(no_ext.status().code(), StatusCode::kInvalidArgument);

  Result<OwnedTensor> missing = ReadTensorFile(Path("missing.npy"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "cannot read tensor file '" + Path("missing.npy") + "': No such file or directory");

  fs::create_directories(Path("dir.pb"));
  Result<OwnedTensor> dir = ReadTensorFile(Path("dir.pb"));
  EXPECT_EQ(dir.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dir.status().message().find("Is a directory"), std::string::npos);

  Status no_dir = WriteTensorFile(Path("nowhere/x.pb"), t.view(), "x");
  EXPECT_EQ(no_dir.code(), StatusCode::kNotFound);
  EXPECT_NE(no_dir.message().find("cannot write tensor file"), std::string::npos);

  std::ofstream(Path("garbage.npy")) << "definitely not numpy";
  Result<OwnedTensor> garbage = ReadTensorFile(Path("garbage.npy"));
  EXPECT_EQ(garbage.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(garbage.status().message().find("tensor file '" + Path("garbage.npy") + "'"),
            std::string::npos)
      << garbage.status().ToString();
  std::ofstream(Path("garbage.pb"), std::ios::binary) << "\x7f\x7f\x7f";
  Result<OwnedTensor> garbage_pb = ReadTensorFile(Path("garbage.pb"));
  EXPECT_EQ(garbage_pb.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(garbage_pb.status().message().find("garbage.pb"), std::string::npos);
}

TEST_F(TensorFileTest, ReadsOnnxBackendTestData) {
  const std::string data_dir = KILN_ONNX_TESTDATA_DIR;
  ASSERT_FALSE(data_dir.empty())
      << "ONNX backend test data not found at configure time: install libonnx-testdata or set "
         "KILN_ONNX_TESTDATA_DIR";
  std::string name;
  Result<OwnedTensor> x =
      ReadTensorFile(data_dir + "/node/test_add/test_data_set_0/input_0.pb", &name);
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  EXPECT_EQ(name, "x");
  EXPECT_EQ(x->dtype(), DataType::kFloat32);
  EXPECT_EQ(x->shape(), (Shape{3, 4, 5}));
  // Converting to .npy and back keeps the bits.
  ASSERT_TRUE(WriteTensorFile(Path("x.npy"), x->view(), name).ok());
  Result<OwnedTensor> y = ReadTensorFile(Path("x.npy"));
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(std::memcmp(x->raw_data(), y->raw_data(), x->size_bytes()), 0);
}

}  // namespace
}  // namespace kiln
