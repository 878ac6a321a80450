// SPDX-License-Identifier: Apache-2.0
// Tests for TensorSequence and RuntimeValue: construction, the element-type invariant, insert and
// erase positions, buffer sharing on copy, and the text used in messages.

#include "tensor/runtime_value.h"

#include <gtest/gtest.h>

#include <vector>

namespace kiln {
namespace {

OwnedTensor Floats(const Shape& shape, std::vector<float> values) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kFloat32, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  for (size_t i = 0; i < values.size(); ++i) t->data<float>()[i] = values[i];
  return std::move(t).value();
}

OwnedTensor Int64s(const Shape& shape) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kInt64, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  return std::move(t).value();
}

std::vector<float> FirstElements(const TensorSequence& s) {
  std::vector<float> out;
  for (const OwnedTensor& t : s.elements()) out.push_back(t.data<const float>()[0]);
  return out;
}

TEST(TensorSequenceTest, EmptySequenceKeepsItsElementType) {
  TensorSequence s(DataType::kInt64);
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.size(), 0);
  EXPECT_EQ(s.elem_dtype(), DataType::kInt64);
  EXPECT_EQ(s.Describe(), "sequence of 0 INT64 tensors");
}

TEST(TensorSequenceTest, CreateChecksEveryElementType) {
  Result<TensorSequence> ok =
      TensorSequence::Create(DataType::kFloat32, {Floats({2}, {1, 2}), Floats({3}, {3, 4, 5})});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->size(), 2);
  EXPECT_EQ(ok->at(1).shape(), (Shape{3}));  // element shapes may differ

  Result<TensorSequence> mixed =
      TensorSequence::Create(DataType::kFloat32, {Floats({1}, {1}), Int64s({1})});
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mixed.status().message().find("sequence element 1 is INT64"), std::string::npos)
      << mixed.status().message();

  Result<TensorSequence> untyped = TensorSequence::Create(DataType::kInvalid, {});
  EXPECT_EQ(untyped.status().code(), StatusCode::kInvalidArgument);
}

TEST(TensorSequenceTest, InsertAndEraseAtPositions) {
  TensorSequence s(DataType::kFloat32);
  ASSERT_TRUE(s.Insert(0, Floats({1}, {2})).ok());
  ASSERT_TRUE(s.Insert(1, Floats({1}, {3})).ok());  // append
  ASSERT_TRUE(s.Insert(0, Floats({1}, {1})).ok());  // front
  EXPECT_EQ(FirstElements(s), (std::vector<float>{1, 2, 3}));

  Status out_of_range = s.Insert(4, Floats({1}, {9}));
  EXPECT_EQ(out_of_range.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out_of_range.message().find("insert position 4 is outside [0, 3]"), std::string::npos)
      << out_of_range.message();
  EXPECT_EQ(s.Insert(-1, Floats({1}, {9})).code(), StatusCode::kInvalidArgument);
  Status wrong_type = s.Insert(0, Int64s({1}));
  EXPECT_NE(wrong_type.message().find("cannot insert a INT64 tensor into a sequence of FP32"),
            std::string::npos)
      << wrong_type.message();
  EXPECT_EQ(s.size(), 3);

  ASSERT_TRUE(s.Erase(1).ok());
  EXPECT_EQ(FirstElements(s), (std::vector<float>{1, 3}));
  EXPECT_EQ(s.Erase(2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Erase(-1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.size(), 2);
}

TEST(TensorSequenceTest, CopiesShareElementBuffersButNotTheList) {
  TensorSequence a(DataType::kFloat32);
  ASSERT_TRUE(a.Insert(0, Floats({1}, {7})).ok());
  TensorSequence b = a;
  ASSERT_TRUE(b.Insert(1, Floats({1}, {8})).ok());
  EXPECT_EQ(a.size(), 1);
  EXPECT_EQ(b.size(), 2);
  EXPECT_EQ(a.at(0).raw_data(), b.at(0).raw_data());
}

TEST(RuntimeValueTest, KindsAndDescriptions) {
  RuntimeValue invalid;
  EXPECT_FALSE(invalid.valid());
  EXPECT_EQ(invalid.kind(), RuntimeValue::Kind::kInvalid);

  RuntimeValue none = RuntimeValue::None();
  EXPECT_TRUE(none.valid());
  EXPECT_TRUE(none.is_none());
  EXPECT_FALSE(none.is_tensor());
  EXPECT_EQ(none.Describe(), "none (an empty optional)");

  RuntimeValue tensor(Floats({2, 3}, {}));
  EXPECT_TRUE(tensor.is_tensor());
  EXPECT_EQ(tensor.tensor().shape(), (Shape{2, 3}));
  EXPECT_EQ(tensor.Describe(), "tensor FP32[2,3]");

  Result<TensorSequence> s = TensorSequence::Create(DataType::kFloat32, {Floats({1}, {1})});
  ASSERT_TRUE(s.ok());
  RuntimeValue seq(std::move(s).value());
  EXPECT_TRUE(seq.is_sequence());
  EXPECT_EQ(seq.sequence().size(), 1);
  EXPECT_EQ(seq.Describe(), "sequence of 1 FP32 tensor");
}

TEST(RuntimeValueDeathTest, WrongAccessorIsABug) {
  RuntimeValue none = RuntimeValue::None();
  EXPECT_DEATH((void)none.tensor(), "tensor\\(\\) on a none");
  EXPECT_DEATH((void)none.sequence(), "sequence\\(\\) on a none");
}

}  // namespace
}  // namespace kiln
