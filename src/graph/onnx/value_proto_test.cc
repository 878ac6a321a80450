// SPDX-License-Identifier: Apache-2.0
// Tests for SequenceProto / OptionalProto values (value_proto.h) and value files (tensor_file.h
// ReadValueFile / WriteValueFile): the ONNX backend test data's sequence and optional files,
// round trips of every kind, each malformed-message error, and a deterministic mutation test
// (flipped and truncated bytes must give errors, never crashes).

#include "graph/onnx/value_proto.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>

#include "base/testing/mutate.h"
#include "graph/onnx/file_io.h"
#include "graph/onnx/tensor_file.h"
#include "graph/onnx/tensor_proto_convert.h"
#include "onnx/onnx-data_pb.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using onnx::OptionalProto;
using onnx::SequenceProto;
using onnx::TensorProto;

ValueType TensorType(DataType dtype) {
  ValueType t;
  t.dtype = dtype;
  return t;
}
ValueType SeqType(DataType dtype) { return ValueType::Sequence(TensorType(dtype)); }

OwnedTensor Int64s(const Shape& shape, std::vector<int64_t> values) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kInt64, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  for (size_t i = 0; i < values.size(); ++i) t->data<int64_t>()[i] = values[i];
  return std::move(t).value();
}

OwnedTensor Floats(const Shape& shape, std::vector<float> values) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kFloat32, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  for (size_t i = 0; i < values.size(); ++i) t->data<float>()[i] = values[i];
  return std::move(t).value();
}

std::vector<int64_t> Values(const OwnedTensor& t) {
  return std::vector<int64_t>(t.data<const int64_t>(), t.data<const int64_t>() + t.num_elements());
}

TensorProto FloatProto(const std::vector<int64_t>& dims, const std::vector<float>& values) {
  TensorProto t;
  t.set_data_type(TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float v : values) t.add_float_data(v);
  return t;
}

std::string TestData(std::string_view rel) {
  return std::string(KILN_ONNX_TESTDATA_DIR) + "/node/" + std::string(rel);
}

void ExpectError(const Status& s, StatusCode code, std::string_view part) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(part), std::string::npos)
      << "message '" << s.message() << "' lacks '" << part << "'";
}

// ---------------------------------------------------------------------------------------------
// The backend test data.

TEST(ValueProtoTest, ReadsTheBackendTestDataSequencesAndOptionals) {
  // test_sequence_insert_at_back: a sequence of INT64 [1,2,3,4], [5,6,7], [8,9].
  std::string name;
  Result<RuntimeValue> seq =
      ReadValueFile(TestData("test_sequence_insert_at_back/test_data_set_0/input_0.pb"),
                    SeqType(DataType::kInt64), &name);
  ASSERT_TRUE(seq.ok()) << seq.status().ToString();
  ASSERT_TRUE(seq->is_sequence());
  EXPECT_EQ(name, "sequence");
  ASSERT_EQ(seq->sequence().size(), 3);
  EXPECT_EQ(seq->sequence().at(0).shape(), (Shape{4}));
  EXPECT_EQ(seq->sequence().at(1).shape(), (Shape{3}));
  EXPECT_EQ(seq->sequence().at(2).shape(), (Shape{2}));
  EXPECT_EQ(Values(seq->sequence().at(1)), (std::vector<int64_t>{5, 6, 7}));

  // test_loop13_seq: an empty sequence; its dtype comes from the declared type.
  Result<RuntimeValue> empty = ReadValueFile(TestData("test_loop13_seq/test_data_set_0/input_2.pb"),
                                             SeqType(DataType::kFloat32));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->sequence().empty());
  EXPECT_EQ(empty->sequence().elem_dtype(), DataType::kFloat32);
  // ... and without a declared element type it cannot be read.
  ExpectError(ReadValueFile(TestData("test_loop13_seq/test_data_set_0/input_2.pb"),
                            ValueType::Sequence(ValueType{}))
                  .status(),
              StatusCode::kInvalidArgument, "is empty and its element type is not declared");

  // test_optional_has_element_empty: none.
  Result<RuntimeValue> none =
      ReadValueFile(TestData("test_optional_has_element_empty/test_data_set_0/input_0.pb"),
                    ValueType::Optional(TensorType(DataType::kInt32)));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->is_none());

  // test_optional_get_element: an optional holding FP32 [4]; test_identity_opt: an optional
  // holding a sequence of one FP32 [5].
  Result<RuntimeValue> opt_tensor =
      ReadValueFile(TestData("test_optional_get_element/test_data_set_0/input_0.pb"),
                    ValueType::Optional(TensorType(DataType::kFloat32)));
  ASSERT_TRUE(opt_tensor.ok()) << opt_tensor.status().ToString();
  ASSERT_TRUE(opt_tensor->is_tensor());
  EXPECT_EQ(opt_tensor->tensor().shape(), (Shape{4}));
  Result<RuntimeValue> opt_seq =
      ReadValueFile(TestData("test_identity_opt/test_data_set_0/input_0.pb"),
                    ValueType::Optional(SeqType(DataType::kFloat32)));
  ASSERT_TRUE(opt_seq.ok()) << opt_seq.status().ToString();
  ASSERT_TRUE(opt_seq->is_sequence());
  ASSERT_EQ(opt_seq->sequence().size(), 1);
  EXPECT_EQ(opt_seq->sequence().at(0).shape(), (Shape{5}));

  // The expected output of test_identity_opt is byte for byte what kiln writes for that value.
  const std::string want =
      onnx_internal::ReadWholeFile(TestData("test_identity_opt/test_data_set_0/output_0.pb"),
                                   "test file")
          .value();
  Result<std::string> written =
      ValueToProtoBytes(*opt_seq, ValueType::Optional(SeqType(DataType::kFloat32)), "opt_out");
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(*written, want);
}

// ---------------------------------------------------------------------------------------------
// Round trips.

TEST(ValueProtoTest, RoundTripsEveryKind) {
  Result<TensorSequence> s =
      TensorSequence::Create(DataType::kInt64, {Int64s({2}, {1, 2}), Int64s({1, 3}, {3, 4, 5})});
  ASSERT_TRUE(s.ok());
  const RuntimeValue seq(std::move(s).value());
  const RuntimeValue tensor(Int64s({2}, {7, 8}));
  const RuntimeValue empty{TensorSequence(DataType::kInt64)};
  struct Case {
    RuntimeValue value;
    ValueType type;
  };
  const Case cases[] = {
      {seq, SeqType(DataType::kInt64)},
      {empty, SeqType(DataType::kInt64)},
      {seq, ValueType::Optional(SeqType(DataType::kInt64))},
      {tensor, ValueType::Optional(TensorType(DataType::kInt64))},
      {RuntimeValue::None(), ValueType::Optional(TensorType(DataType::kInt64))},
      {tensor, TensorType(DataType::kInt64)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.type.ToString() + " holding " + c.value.Describe());
    Result<std::string> bytes = ValueToProtoBytes(c.value, c.type, "v");
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    std::string name;
    Result<RuntimeValue> back = ValueFromProtoBytes(*bytes, c.type, &name);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(name, "v");
    ASSERT_EQ(back->kind(), c.value.kind());
    if (c.value.is_tensor()) {
      EXPECT_EQ(back->tensor().shape(), c.value.tensor().shape());
      EXPECT_EQ(Values(back->tensor()), Values(c.value.tensor()));
    }
    if (c.value.is_sequence()) {
      EXPECT_EQ(back->sequence().elem_dtype(), DataType::kInt64);
      ASSERT_EQ(back->sequence().size(), c.value.sequence().size());
      for (int64_t i = 0; i < c.value.sequence().size(); ++i) {
        EXPECT_EQ(back->sequence().at(i).shape(), c.value.sequence().at(i).shape());
        EXPECT_EQ(Values(back->sequence().at(i)), Values(c.value.sequence().at(i)));
      }
    }
  }
  // What is written is what ONNX defines: an OptionalProto of elem_type SEQUENCE, a bare
  // SequenceProto of elem_type TENSOR.
  OptionalProto opt;
  ASSERT_TRUE(opt.ParseFromString(
      *ValueToProtoBytes(seq, ValueType::Optional(SeqType(DataType::kInt64)), "o")));
  EXPECT_EQ(opt.elem_type(), OptionalProto::SEQUENCE);
  EXPECT_EQ(opt.sequence_value().tensor_values_size(), 2);
  SequenceProto sp;
  ASSERT_TRUE(sp.ParseFromString(*ValueToProtoBytes(seq, SeqType(DataType::kInt64), "s")));
  EXPECT_EQ(sp.elem_type(), SequenceProto::TENSOR);
  EXPECT_EQ(sp.tensor_values(1).dims_size(), 2);
}

class ValueFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kiln_value_file_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(std::string_view name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(ValueFileTest, NpyHoldsTensorsOnly) {
  const RuntimeValue tensor(Floats({2}, {1, 2}));
  // An optional's tensor goes to .npy as the plain tensor and comes back as one.
  const ValueType opt = ValueType::Optional(TensorType(DataType::kFloat32));
  ASSERT_TRUE(WriteValueFile(Path("t.npy"), tensor, opt, "t").ok());
  Result<RuntimeValue> back = ReadValueFile(Path("t.npy"), opt);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->tensor().shape(), (Shape{2}));

  Result<TensorSequence> s = TensorSequence::Create(DataType::kFloat32, {Floats({1}, {3})});
  const RuntimeValue seq(std::move(s).value());
  ExpectError(WriteValueFile(Path("s.npy"), seq, SeqType(DataType::kFloat32), "s"),
              StatusCode::kUnimplemented, "which a .npy file cannot hold");
  EXPECT_FALSE(fs::exists(Path("s.npy")));
  ExpectError(WriteValueFile(Path("n.npy"), RuntimeValue::None(), opt, "n"),
              StatusCode::kUnimplemented, "none");
  ExpectError(ReadValueFile(Path("t.npy"), SeqType(DataType::kFloat32)).status(),
              StatusCode::kUnimplemented, "a .npy file holds one tensor");

  // .pb round trip through files, and a missing file names the path.
  ASSERT_TRUE(WriteValueFile(Path("s.pb"), seq, SeqType(DataType::kFloat32), "s").ok());
  Result<RuntimeValue> seq_back = ReadValueFile(Path("s.pb"), SeqType(DataType::kFloat32));
  ASSERT_TRUE(seq_back.ok()) << seq_back.status().ToString();
  EXPECT_EQ(seq_back->sequence().size(), 1);
  ExpectError(ReadValueFile(Path("missing.pb"), SeqType(DataType::kFloat32)).status(),
              StatusCode::kNotFound, "missing.pb");
}

// ---------------------------------------------------------------------------------------------
// Malformed messages.

TEST(ValueProtoTest, RejectsMalformedSequences) {
  const ValueType seq_type = SeqType(DataType::kInvalid);
  auto read = [&](const SequenceProto& p, const ValueType& type) {
    return ValueFromProtoBytes(p.SerializeAsString(), type).status();
  };
  SequenceProto mixed;
  mixed.set_name("m");
  mixed.set_elem_type(SequenceProto::TENSOR);
  *mixed.add_tensor_values() = FloatProto({1}, {1});
  TensorProto* i64 = mixed.add_tensor_values();
  i64->set_data_type(TensorProto::INT64);
  i64->add_int64_data(1);
  ExpectError(read(mixed, seq_type), StatusCode::kInvalidArgument,
              "element 1 of sequence 'm' is INT64, but the sequence holds FP32 tensors");

  SequenceProto declared_other;
  declared_other.set_elem_type(SequenceProto::TENSOR);
  *declared_other.add_tensor_values() = FloatProto({1}, {1});
  ExpectError(read(declared_other, SeqType(DataType::kInt64)), StatusCode::kInvalidArgument,
              "element 0 of sequence is FP32, but the sequence holds INT64 tensors");

  SequenceProto nested;
  nested.set_elem_type(SequenceProto::SEQUENCE);
  nested.add_sequence_values()->set_elem_type(SequenceProto::TENSOR);
  ExpectError(read(nested, seq_type), StatusCode::kUnimplemented,
              "holds SEQUENCE values; kiln supports sequences of tensors only");

  SequenceProto undefined_with_values;
  *undefined_with_values.add_tensor_values() = FloatProto({1}, {1});
  ExpectError(read(undefined_with_values, seq_type), StatusCode::kInvalidArgument,
              "elem_type UNDEFINED but holds values");

  SequenceProto tensor_with_other;
  tensor_with_other.set_elem_type(SequenceProto::TENSOR);
  tensor_with_other.add_optional_values();
  ExpectError(read(tensor_with_other, seq_type), StatusCode::kInvalidArgument,
              "also holds values of another kind");

  SequenceProto bad_element;
  bad_element.set_elem_type(SequenceProto::TENSOR);
  *bad_element.add_tensor_values() = FloatProto({3}, {1});
  ExpectError(read(bad_element, seq_type), StatusCode::kInvalidArgument,
              "element 0 of sequence has 1 values but shape [3] needs 3");

  ExpectError(ValueFromProtoBytes("\xff\xff\xff", seq_type).status(), StatusCode::kInvalidArgument,
              "not a valid serialized onnx SequenceProto");
}

TEST(ValueProtoTest, RejectsMalformedOptionals) {
  const ValueType opt_type = ValueType::Optional(ValueType{});
  auto read = [&](const OptionalProto& p) {
    return ValueFromProtoBytes(p.SerializeAsString(), opt_type).status();
  };
  OptionalProto none_with_value;
  none_with_value.set_name("o");
  *none_with_value.mutable_tensor_value() = FloatProto({1}, {1});
  ExpectError(read(none_with_value), StatusCode::kInvalidArgument,
              "optional 'o' has elem_type UNDEFINED (none) but holds a value");

  OptionalProto tensor_without;
  tensor_without.set_elem_type(OptionalProto::TENSOR);
  ExpectError(read(tensor_without), StatusCode::kInvalidArgument,
              "elem_type TENSOR but does not hold exactly a tensor");

  OptionalProto seq_without;
  seq_without.set_elem_type(OptionalProto::SEQUENCE);
  *seq_without.mutable_tensor_value() = FloatProto({1}, {1});
  ExpectError(read(seq_without), StatusCode::kInvalidArgument,
              "elem_type SEQUENCE but does not hold exactly a sequence");

  OptionalProto map;
  map.set_elem_type(OptionalProto::MAP);
  map.mutable_map_value();
  ExpectError(read(map), StatusCode::kUnimplemented, "holds a MAP value");

  OptionalProto empty_seq;
  empty_seq.set_elem_type(OptionalProto::SEQUENCE);
  empty_seq.mutable_sequence_value()->set_elem_type(SequenceProto::TENSOR);
  ExpectError(read(empty_seq), StatusCode::kInvalidArgument,
              "is empty and its element type is not declared");
  Result<RuntimeValue> typed = ValueFromProtoBytes(empty_seq.SerializeAsString(),
                                                   ValueType::Optional(SeqType(DataType::kBool)));
  ASSERT_TRUE(typed.ok()) << typed.status().ToString();
  EXPECT_EQ(typed->sequence().elem_dtype(), DataType::kBool);
}

// ---------------------------------------------------------------------------------------------
// Mutation test: corrupted SequenceProto / OptionalProto bytes give values or errors, never
// crashes, and never INTERNAL.

TEST(ValueProtoTest, MutatedValuesNeverCrash) {
  SequenceProto seq;
  seq.set_name("s");
  seq.set_elem_type(SequenceProto::TENSOR);
  *seq.add_tensor_values() = FloatProto({2, 2}, {1, 2, 3, 4});
  TensorProto* raw = seq.add_tensor_values();
  raw->set_data_type(TensorProto::FLOAT);
  raw->add_dims(3);
  raw->set_raw_data(std::string(12, '\x01'));
  OptionalProto opt;
  opt.set_name("o");
  opt.set_elem_type(OptionalProto::SEQUENCE);
  *opt.mutable_sequence_value() = seq;
  const struct {
    std::string bytes;
    ValueType type;
  } seeds[] = {{seq.SerializeAsString(), SeqType(DataType::kFloat32)},
               {opt.SerializeAsString(), ValueType::Optional(SeqType(DataType::kFloat32))},
               {opt.SerializeAsString(), ValueType::Optional(ValueType{})}};
  std::mt19937 rng(424242);
  int accepted = 0;
  std::map<StatusCode, int> codes;
  for (int iter = 0; iter < 6000; ++iter) {
    const auto& seed = seeds[iter % 3];
    const std::string bytes = testing::MutateBytes(seed.bytes, rng);
    Result<RuntimeValue> v = ValueFromProtoBytes(bytes, seed.type);
    if (v.ok()) {
      ++accepted;
      ASSERT_TRUE(v->valid());
      if (v->is_sequence()) {
        for (const OwnedTensor& t : v->sequence().elements()) {
          ASSERT_EQ(t.dtype(), v->sequence().elem_dtype());
        }
      }
    } else {
      ++codes[v.status().code()];
      EXPECT_FALSE(v.status().message().empty());
      EXPECT_NE(v.status().code(), StatusCode::kInternal) << v.status().ToString();
    }
  }
  // Both outcomes must occur, or the mutations are not testing anything.
  EXPECT_GT(accepted, 0);
  EXPECT_FALSE(codes.empty());
}

}  // namespace
}  // namespace kiln
