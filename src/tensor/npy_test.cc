// SPDX-License-Identifier: Apache-2.0
// Tests for the NPY reader and writer: byte-for-byte agreement with files written by numpy 1.24,
// round trips of every supported dtype, byte orders and versions, every malformed-header error,
// and a deterministic mutation test (flipped and truncated bytes must give errors, not crashes).

#include "tensor/npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/testing/mutate.h"

namespace kiln {
namespace {

std::string FromHex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// An NPY file with the given version, header text (padding is not added) and data bytes.
std::string MakeNpy(int major, std::string_view header, std::string_view data) {
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  const size_t n = header.size();
  out.push_back(static_cast<char>(n & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  if (major >= 2) {
    out.push_back(static_cast<char>((n >> 16) & 0xff));
    out.push_back(static_cast<char>((n >> 24) & 0xff));
  }
  out.append(header);
  out.append(data);
  return out;
}

std::string NumpyHeader(std::string_view dict) {
  // numpy pads with spaces so that magic + length + header is a multiple of 64 bytes.
  std::string h(dict);
  while ((10 + h.size() + 1) % 64 != 0) h.push_back(' ');
  return h + "\n";
}

// np.save(f, np.arange(6, dtype='<f4').reshape(2, 3)) with numpy 1.24.2.
std::string NumpyF32File() {
  return MakeNpy(1, NumpyHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"),
                 FromHex("000000000000803f0000004000004040000080400000a040"));
}

template <typename T>
std::vector<T> Values(const OwnedTensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

TEST(NpyTest, ReadsFileWrittenByNumpy) {
  const std::string file = NumpyF32File();
  ASSERT_EQ(file.size(), 152u);  // what numpy wrote
  Result<OwnedTensor> t = ReadNpy(file);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->dtype(), DataType::kFloat32);
  EXPECT_EQ(t->shape(), (Shape{2, 3}));
  EXPECT_EQ(Values<float>(*t), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST(NpyTest, WritesWhatNumpyWrites) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kFloat32, Shape{2, 3});
  ASSERT_TRUE(t.ok());
  for (int i = 0; i < 6; ++i) t->data<float>()[i] = static_cast<float>(i);
  Result<std::string> bytes = WriteNpy(t->view());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(*bytes, NumpyF32File());
}

TEST(NpyTest, ReadsNumpyVersions2And3AndScalars) {
  // np.lib.format.write_array(f, np.array([1.5, 2.5], '<f8'), version=(2, 0))
  Result<OwnedTensor> v2 =
      ReadNpy(MakeNpy(2, NumpyHeader("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }  "),
                      FromHex("000000000000f83f0000000000000440")));
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(Values<double>(*v2), (std::vector<double>{1.5, 2.5}));
  // version=(3, 0), np.array([7], '<u2')
  Result<OwnedTensor> v3 = ReadNpy(
      MakeNpy(3, "{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }\n", FromHex("0700")));
  ASSERT_TRUE(v3.ok()) << v3.status().ToString();
  EXPECT_EQ(Values<uint16_t>(*v3), (std::vector<uint16_t>{7}));
  // np.save(f, np.array(True)): a rank-0 scalar.
  Result<OwnedTensor> scalar = ReadNpy(MakeNpy(
      1, NumpyHeader("{'descr': '|b1', 'fortran_order': False, 'shape': (), }"), FromHex("01")));
  ASSERT_TRUE(scalar.ok()) << scalar.status().ToString();
  EXPECT_EQ(scalar->shape().rank(), 0);
  EXPECT_TRUE(scalar->data<bool>()[0]);
  // np.array([1.0, -2.0], '<f2')
  Result<OwnedTensor> f16 =
      ReadNpy(MakeNpy(1, NumpyHeader("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }"),
                      FromHex("003c00c0")));
  ASSERT_TRUE(f16.ok()) << f16.status().ToString();
  EXPECT_EQ(Float16ToFloat(f16->data<Float16>()[1]), -2.0f);
}

TEST(NpyTest, BigEndianIsByteSwapped) {
  // np.array([1, -2, 3], dtype='>i4')
  Result<OwnedTensor> t =
      ReadNpy(MakeNpy(1, NumpyHeader("{'descr': '>i4', 'fortran_order': False, 'shape': (3,), }"),
                      FromHex("00000001fffffffe00000003")));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(Values<int32_t>(*t), (std::vector<int32_t>{1, -2, 3}));
  Result<OwnedTensor> d = ReadNpy(MakeNpy(
      1, "{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }", FromHex("3ff8000000000000")));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(Values<double>(*d), (std::vector<double>{1.5}));
}

TEST(NpyTest, AcceptsOtherByteOrderMarksAndHeaderSpellings) {
  const std::string data = FromHex("0500000006000000");
  for (const char* header : {"{'descr': '=i4', 'fortran_order': False, 'shape': (2,), }",
                             "{'descr': '|i4', 'fortran_order': False, 'shape': (2,)}",
                             "{'descr': 'i4', 'shape': (2,), 'fortran_order': False}",
                             "{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (2L,), }\n",
                             "  {'descr':'<i4','fortran_order':False,'shape':(2)}  \n",
                             "{'descr': '<i4', 'fortran_order': False, 'shape': ( 1 , 2 , ), }"}) {
    Result<OwnedTensor> t = ReadNpy(MakeNpy(1, header, data));
    ASSERT_TRUE(t.ok()) << header << ": " << t.status().ToString();
    EXPECT_EQ(t->num_elements(), 2) << header;
    EXPECT_EQ(t->data<int32_t>()[1], 6) << header;
  }
}

TEST(NpyTest, BoolBytesAreNormalized) {
  Result<OwnedTensor> t =
      ReadNpy(MakeNpy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                      std::string("\0\x01\x07", 3)));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const auto* bytes = static_cast<const unsigned char*>(t->raw_data());
  EXPECT_EQ(bytes[0], 0);
  EXPECT_EQ(bytes[1], 1);
  EXPECT_EQ(bytes[2], 1);
}

TEST(NpyTest, EveryDtypeRoundTrips) {
  const DataType dtypes[] = {DataType::kBool,    DataType::kUint8,   DataType::kUint16,
                             DataType::kUint32,  DataType::kUint64,  DataType::kInt8,
                             DataType::kInt16,   DataType::kInt32,   DataType::kInt64,
                             DataType::kFloat16, DataType::kFloat32, DataType::kFloat64};
  const std::vector<Shape> shapes = {
      Shape{}, Shape{0}, Shape{5}, Shape{2, 3, 4}, Shape{1, 1, 1, 1, 1, 1, 1, 2}, Shape{3, 0, 2}};
  std::mt19937 rng(7);
  for (DataType dtype : dtypes) {
    for (const Shape& shape : shapes) {
      Result<OwnedTensor> t = OwnedTensor::Allocate(dtype, shape);
      ASSERT_TRUE(t.ok());
      auto* p = static_cast<unsigned char*>(t->raw_data());
      for (size_t i = 0; i < t->size_bytes(); ++i) {
        p[i] = dtype == DataType::kBool ? rng() % 2 : static_cast<unsigned char>(rng());
      }
      Result<std::string> bytes = WriteNpy(t->view());
      ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
      const size_t header_end = bytes->find('\n') + 1;
      EXPECT_EQ(header_end % 64, 0u) << DataTypeName(dtype) << shape.ToString();
      Result<OwnedTensor> back = ReadNpy(*bytes);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_EQ(back->dtype(), dtype);
      EXPECT_EQ(back->shape(), shape);
      ASSERT_EQ(back->size_bytes(), t->size_bytes());
      EXPECT_EQ(std::memcmp(back->raw_data(), t->raw_data(), t->size_bytes()), 0)
          << DataTypeName(dtype) << shape.ToString();
    }
  }
}

TEST(NpyTest, WriteRejectsTypesNumpyLacks) {
  for (DataType dtype : {DataType::kBFloat16, DataType::kBytes}) {
    Result<OwnedTensor> t = OwnedTensor::Allocate(dtype, Shape{2});
    ASSERT_TRUE(t.ok());
    Result<std::string> bytes = WriteNpy(t->view());
    ASSERT_FALSE(bytes.ok());
    EXPECT_EQ(bytes.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(bytes.status().message().find(DataTypeName(dtype)), std::string::npos);
  }
  EXPECT_FALSE(WriteNpy(Tensor()).ok());
}

struct BadCase {
  const char* what;
  std::string bytes;
  StatusCode code;
  const char* message_part;
};

TEST(NpyTest, MalformedFilesGiveClearErrors) {
  const std::string f32_2 = FromHex("0000803f00000040");
  auto v1 = [&](std::string_view header) { return MakeNpy(1, header, f32_2); };
  const std::string good = NumpyF32File();
  std::string bad_minor = good;
  bad_minor[7] = 1;
  std::string long_header = good;
  long_header[8] = '\xff';
  const std::vector<BadCase> cases = {
      {"empty", "", StatusCode::kInvalidArgument, "not an NPY file"},
      {"bad magic", std::string("\x93NUMPZ\x01\x00", 8), StatusCode::kInvalidArgument,
       "not an NPY file"},
      {"text", "hello world, not numpy", StatusCode::kInvalidArgument, "not an NPY file"},
      {"no version", std::string("\x93NUMPY\x01", 7), StatusCode::kInvalidArgument, "truncated"},
      {"no length", std::string("\x93NUMPY\x01\x00\x10", 9), StatusCode::kInvalidArgument,
       "truncated"},
      {"version 4", MakeNpy(4, "{}", ""), StatusCode::kUnimplemented, "version 4.0"},
      {"version 1.1", bad_minor, StatusCode::kUnimplemented, "version 1.1"},
      {"header past end", long_header, StatusCode::kInvalidArgument, "header is truncated"},
      {"not a dict", v1("['descr']"), StatusCode::kInvalidArgument, "expected '{'"},
      {"missing key", v1("{'descr': '<f4', 'shape': (2,)}"), StatusCode::kInvalidArgument,
       "must have the keys"},
      {"unknown key", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}"),
       StatusCode::kInvalidArgument, "unexpected key 'x'"},
      {"duplicate key", v1("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False}"),
       StatusCode::kInvalidArgument, "duplicate key"},
      {"unterminated", v1("{'descr': '<f4"), StatusCode::kInvalidArgument, "unterminated"},
      {"unclosed dict", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)"),
       StatusCode::kInvalidArgument, "expected ',' or '}'"},
      {"escape", v1("{'descr': '<f\\x34'}"), StatusCode::kInvalidArgument, "escape"},
      {"bad bool", v1("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}"),
       StatusCode::kInvalidArgument, "True or False"},
      {"negative dim", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}"),
       StatusCode::kInvalidArgument, "non-negative"},
      {"dim overflow",
       v1("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}"),
       StatusCode::kInvalidArgument, "64 bits"},
      {"shape not a tuple", v1("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}"),
       StatusCode::kInvalidArgument, "expected '('"},
      {"unclosed tuple", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}"),
       StatusCode::kInvalidArgument, "in the shape tuple"},
      {"trailing text", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x"),
       StatusCode::kInvalidArgument, "after the dict"},
      {"rank 9", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,2)}"),
       StatusCode::kInvalidArgument, "rank 9"},
      {"element count overflow",
       v1("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4)}"),
       StatusCode::kInvalidArgument, "64 bits"},
      {"huge dims, tiny data",
       v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 1000000000)}"),
       StatusCode::kInvalidArgument, "needs 1000000000000000000 elements"},
      {"truncated data", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}"),
       StatusCode::kInvalidArgument, "NPY data is 8 bytes but shape [3]"},
      {"extra data", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}"),
       StatusCode::kInvalidArgument, "NPY data is 8 bytes but shape [1]"},
      {"data for an empty shape", v1("{'descr': '<f8', 'fortran_order': False, 'shape': (0,)}"),
       StatusCode::kInvalidArgument, "needs 0 elements"},
      {"complex", v1("{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}"),
       StatusCode::kUnimplemented, "'<c8' is not supported"},
      {"unicode", v1("{'descr': '<U1', 'fortran_order': False, 'shape': (2,)}"),
       StatusCode::kUnimplemented, "not supported"},
      {"structured", v1("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}"),
       StatusCode::kUnimplemented, "structured"},
      {"fortran", v1("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2)}"),
       StatusCode::kUnimplemented, "Fortran"},
  };
  for (const BadCase& c : cases) {
    Result<OwnedTensor> t = ReadNpy(c.bytes);
    ASSERT_FALSE(t.ok()) << c.what;
    EXPECT_EQ(t.status().code(), c.code) << c.what << ": " << t.status().ToString();
    EXPECT_NE(t.status().message().find(c.message_part), std::string::npos)
        << c.what << ": " << t.status().ToString();
  }
}

TEST(NpyTest, EveryTruncationIsAnError) {
  const std::string good = NumpyF32File();
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(ReadNpy(std::string_view(good).substr(0, n)).ok()) << n;
  }
}

// Flips, overwrites, inserts and truncates bytes of valid files thousands of times. Every result
// must be an error or a consistent tensor; the test passing without a crash (or, under ASan, a
// memory error) is the point.
TEST(NpyTest, MutatedFilesNeverCrash) {
  Result<OwnedTensor> i64 = OwnedTensor::Allocate(DataType::kInt64, Shape{3, 2});
  ASSERT_TRUE(i64.ok());
  Result<std::string> written = WriteNpy(i64->view());
  ASSERT_TRUE(written.ok());
  const std::string seeds[] = {NumpyF32File(), *written};
  std::mt19937 rng(20240611);
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    const std::string bytes =
        testing::MutateBytes(seeds[iter % 2], rng, "0123456789(),'{}: LTF<>|");
    Result<OwnedTensor> t = ReadNpy(bytes);
    if (t.ok()) {
      ++accepted;
      EXPECT_LE(t->size_bytes(), bytes.size());
    } else {
      EXPECT_FALSE(t.status().message().empty());
    }
  }
  // Flipping a data byte leaves a valid file, so some mutants must be accepted.
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace kiln
