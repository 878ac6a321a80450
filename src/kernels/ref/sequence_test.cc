// SPDX-License-Identifier: Apache-2.0
// Tests for the sequence and optional reference kernels (sequence.cc), each run through OpTest
// (registry lookup, factory, Compute) on hand-built values: results, the sharing of elements
// that are passed on, positions at both ends and out of range, and the error for each kind of
// bad input (wrong dtype, wrong kind of value, bad attributes).

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <optional>
#include <utility>
#include <vector>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref {
namespace {

using testing::ExpectInvalid;
using testing::ExpectTensor;
using testing::IntAttr;
using testing::MakeTensor;
using testing::OpTest;

ValueType TensorType(DataType dtype) {
  ValueType t;
  t.dtype = dtype;
  return t;
}

ValueType SeqType(DataType dtype) { return ValueType::Sequence(TensorType(dtype)); }

// A sequence of 1-D float tensors holding `elements`.
RuntimeValue FloatSeq(const std::vector<std::vector<float>>& elements) {
  std::vector<OwnedTensor> tensors;
  tensors.reserve(elements.size());
  for (const std::vector<float>& e : elements) {
    tensors.push_back(MakeTensor<float>(Shape{static_cast<int64_t>(e.size())}, e));
  }
  Result<TensorSequence> s = TensorSequence::Create(DataType::kFloat32, std::move(tensors));
  KILN_CHECK(s.ok(), s.status().ToString());
  return RuntimeValue(std::move(s).value());
}

// The first element of each tensor in a sequence of floats (elements here are distinguishable by
// it).
std::vector<float> Firsts(const RuntimeValue& v) {
  std::vector<float> out;
  if (!v.is_sequence()) return out;
  for (const OwnedTensor& t : v.sequence().elements()) {
    out.push_back(t.num_elements() > 0 ? t.data<const float>()[0] : -1.f);
  }
  return out;
}

OwnedTensor Pos(int64_t p) { return MakeTensor<int64_t>(Shape{}, {p}); }

// ---------------------------------------------------------------------------------------------
// SequenceEmpty, SequenceConstruct, SequenceLength.

TEST(SequenceKernelsTest, SequenceEmptyIsTypedByItsAttribute) {
  RuntimeValue v = OpTest("SequenceEmpty", 11).RunOneValue();
  ASSERT_TRUE(v.is_sequence());
  EXPECT_TRUE(v.sequence().empty());
  EXPECT_EQ(v.sequence().elem_dtype(), DataType::kFloat32);  // the default, FLOAT

  v = OpTest("SequenceEmpty", 11).Attr(IntAttr("dtype", 7)).RunOneValue();  // INT64
  ASSERT_TRUE(v.is_sequence());
  EXPECT_EQ(v.sequence().elem_dtype(), DataType::kInt64);

  ExpectInvalid(OpTest("SequenceEmpty", 11).Attr(IntAttr("dtype", 14)).Create(),  // COMPLEX128
                {"SequenceEmpty", "'dtype' 14"});
}

TEST(SequenceKernelsTest, SequenceConstructCopiesItsInputsInOrder) {
  OwnedTensor a = MakeTensor<float>(Shape{2}, {1, 2});
  OwnedTensor b = MakeTensor<float>(Shape{1, 3}, {3, 4, 5});
  RuntimeValue v = OpTest("SequenceConstruct", 11).Input(a).Input(b).Input(a).RunOneValue();
  ASSERT_TRUE(v.is_sequence());
  ASSERT_EQ(v.sequence().size(), 3);
  EXPECT_EQ(v.sequence().elem_dtype(), DataType::kFloat32);
  ExpectTensor<float>(v.sequence().at(0), Shape{2}, {1, 2});
  ExpectTensor<float>(v.sequence().at(1), Shape{1, 3}, {3, 4, 5});
  ExpectTensor<float>(v.sequence().at(2), Shape{2}, {1, 2});
  EXPECT_NE(v.sequence().at(0).raw_data(), a.raw_data());  // its own memory

  ExpectInvalid(OpTest("SequenceConstruct", 11)
                    .Input(a)
                    .Input(MakeTensor<int64_t>(Shape{1}, {1}))
                    .RunValuesStatus(),
                {"SequenceConstruct", "input 1 is INT64 but input 0 is FP32"});
  ExpectInvalid(OpTest("SequenceConstruct", 11).ValueInput(FloatSeq({{1}})).RunValuesStatus(),
                {"SequenceConstruct", "input 0 must be a tensor", "sequence of 1 FP32 tensor"});
  ExpectInvalid(OpTest("SequenceConstruct", 11).Create(), {"needs at least one input"});
}

TEST(SequenceKernelsTest, SequenceLengthCountsElements) {
  for (int n : {0, 1, 3}) {
    std::vector<std::vector<float>> elements(static_cast<size_t>(n), std::vector<float>{1});
    RuntimeValue seq =
        n == 0 ? RuntimeValue(TensorSequence(DataType::kFloat32)) : FloatSeq(elements);
    OwnedTensor len = OpTest("SequenceLength", 11)
                          .ValueInput(seq, SeqType(DataType::kFloat32))
                          .RunValues()
                          .value()
                          .at(0)
                          .tensor();
    ExpectTensor<int64_t>(len, Shape{}, {n});
  }
  ExpectInvalid(
      OpTest("SequenceLength", 11).Input(MakeTensor<float>(Shape{2}, {1, 2})).RunValuesStatus(),
      {"SequenceLength", "input 0 must be a sequence", "tensor FP32[2]"});
}

// ---------------------------------------------------------------------------------------------
// SequenceInsert, SequenceAt, SequenceErase: positions.

TEST(SequenceKernelsTest, SequenceInsertAtEveryPosition) {
  const RuntimeValue seq = FloatSeq({{10}, {20}, {30}});
  struct Case {
    std::optional<int64_t> pos;  // nullopt: input omitted (append)
    std::vector<float> want;
  };
  const Case cases[] = {{std::nullopt, {10, 20, 30, 99}},
                        {0, {99, 10, 20, 30}},
                        {1, {10, 99, 20, 30}},
                        {3, {10, 20, 30, 99}},
                        {-1, {10, 20, 99, 30}},
                        {-3, {99, 10, 20, 30}}};
  for (const Case& c : cases) {
    OpTest t("SequenceInsert", 11);
    t.ValueInput(seq, SeqType(DataType::kFloat32)).Input(MakeTensor<float>(Shape{1}, {99}));
    if (c.pos) t.Input(Pos(*c.pos));
    RuntimeValue out = t.RunOneValue();
    EXPECT_EQ(Firsts(out), c.want) << "position " << c.pos.value_or(-99);
    // Elements that were there are shared with the input sequence, not copied.
    ASSERT_TRUE(out.is_sequence());
    bool shared = false;
    for (const OwnedTensor& e : out.sequence().elements()) {
      shared = shared || e.raw_data() == seq.sequence().at(0).raw_data();
    }
    EXPECT_TRUE(shared);
  }
  EXPECT_EQ(seq.sequence().size(), 3);  // the input is unchanged

  // An int32 position works too; an empty sequence takes position 0.
  RuntimeValue out = OpTest("SequenceInsert", 11)
                         .ValueInput(RuntimeValue(TensorSequence(DataType::kFloat32)))
                         .Input(MakeTensor<float>(Shape{1}, {5}))
                         .Input(MakeTensor<int32_t>(Shape{}, {0}))
                         .RunOneValue();
  EXPECT_EQ(Firsts(out), (std::vector<float>{5}));

  for (int64_t bad : {4, -4}) {
    ExpectInvalid(OpTest("SequenceInsert", 11)
                      .ValueInput(seq)
                      .Input(MakeTensor<float>(Shape{1}, {99}))
                      .Input(Pos(bad))
                      .RunValuesStatus(),
                  {"SequenceInsert", fmt::format("position {} is out of range [-3, 3]", bad)});
  }
  ExpectInvalid(OpTest("SequenceInsert", 11)
                    .ValueInput(seq)
                    .Input(MakeTensor<int64_t>(Shape{1}, {1}))
                    .RunValuesStatus(),
                {"SequenceInsert", "cannot insert a INT64 tensor into a sequence of FP32"});
  ExpectInvalid(OpTest("SequenceInsert", 11)
                    .ValueInput(seq)
                    .Input(MakeTensor<float>(Shape{1}, {1}))
                    .Input(MakeTensor<float>(Shape{}, {0}))
                    .RunValuesStatus(),
                {"SequenceInsert", "'position' must be an INT32 or INT64 scalar, got FP32[]"});
  ExpectInvalid(OpTest("SequenceInsert", 11).ValueInput(seq).ValueInput(seq).RunValuesStatus(),
                {"SequenceInsert", "input 1 must be a tensor"});
  ExpectInvalid(OpTest("SequenceInsert", 11).ValueInput(seq).Create(), {"required input 1"});
}

TEST(SequenceKernelsTest, SequenceAtReturnsTheElementAtAPosition) {
  const RuntimeValue seq = FloatSeq({{10, 11}, {20}, {30, 31, 32}});
  const std::pair<int64_t, int64_t> cases[] = {{0, 0}, {2, 2}, {-1, 2}, {-3, 0}, {1, 1}};
  for (auto [pos, index] : cases) {
    RuntimeValue out = OpTest("SequenceAt", 11).ValueInput(seq).Input(Pos(pos)).RunOneValue();
    ASSERT_TRUE(out.is_tensor()) << pos;
    const OwnedTensor& want = seq.sequence().at(index);
    EXPECT_EQ(out.tensor().shape(), want.shape());
    EXPECT_EQ(out.tensor().raw_data(), want.raw_data()) << "the element itself, shared";
  }
  for (int64_t bad : {3, -4}) {
    ExpectInvalid(OpTest("SequenceAt", 11).ValueInput(seq).Input(Pos(bad)).RunValuesStatus(),
                  {"SequenceAt", fmt::format("position {} is out of range [-3, 2]", bad)});
  }
  ExpectInvalid(OpTest("SequenceAt", 11)
                    .ValueInput(RuntimeValue(TensorSequence(DataType::kFloat32)))
                    .Input(Pos(0))
                    .RunValuesStatus(),
                {"SequenceAt", "position 0 is out of range [0, -1] for a sequence of length 0"});
  ExpectInvalid(OpTest("SequenceAt", 11)
                    .ValueInput(seq)
                    .Input(MakeTensor<int64_t>(Shape{2}, {0, 1}))
                    .RunValuesStatus(),
                {"SequenceAt", "'position' must be an INT32 or INT64 scalar, got INT64[2]"});
  ExpectInvalid(
      OpTest("SequenceAt", 11).ValueInput(RuntimeValue::None()).Input(Pos(0)).RunValuesStatus(),
      {"SequenceAt", "input 0 must be a sequence, got none"});
}

TEST(SequenceKernelsTest, SequenceEraseRemovesOneElement) {
  const RuntimeValue seq = FloatSeq({{10}, {20}, {30}});
  struct Case {
    std::optional<int64_t> pos;
    std::vector<float> want;
  };
  const Case cases[] = {
      {std::nullopt, {10, 20}}, {0, {20, 30}}, {1, {10, 30}}, {-1, {10, 20}}, {-3, {20, 30}}};
  for (const Case& c : cases) {
    OpTest t("SequenceErase", 11);
    t.ValueInput(seq);
    if (c.pos) t.Input(Pos(*c.pos));
    EXPECT_EQ(Firsts(t.RunOneValue()), c.want) << c.pos.value_or(-99);
  }
  ExpectInvalid(OpTest("SequenceErase", 11).ValueInput(seq).Input(Pos(3)).RunValuesStatus(),
                {"SequenceErase", "position 3 is out of range [-3, 2]"});
  ExpectInvalid(OpTest("SequenceErase", 11)
                    .ValueInput(RuntimeValue(TensorSequence(DataType::kFloat32)))
                    .RunValuesStatus(),
                {"SequenceErase", "cannot erase from an empty sequence"});
}

// ---------------------------------------------------------------------------------------------
// SplitToSequence and ConcatFromSequence.

// x = [[0,1,2,3,4],[5,6,7,8,9]] (FP32 [2,5]); x[r][c] = 5r + c.
OwnedTensor TwoByFive() {
  std::vector<float> v(10);
  for (int i = 0; i < 10; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  return MakeTensor<float>(Shape{2, 5}, v);
}

// The columns [begin, begin+len) of TwoByFive(), as a [2, len] block, row-major.
std::vector<float> Columns(int begin, int len) {
  std::vector<float> out;
  for (int r = 0; r < 2; ++r) {
    for (int c = begin; c < begin + len; ++c) out.push_back(static_cast<float>(5 * r + c));
  }
  return out;
}

TEST(SequenceKernelsTest, SplitToSequenceWithoutSplitGivesSlicesOfOne) {
  for (bool keepdims : {true, false}) {
    RuntimeValue v = OpTest("SplitToSequence", 11)
                         .Input(TwoByFive())
                         .Attr(IntAttr("axis", 1))
                         .Attr(IntAttr("keepdims", keepdims ? 1 : 0))
                         .RunOneValue();
    ASSERT_TRUE(v.is_sequence());
    ASSERT_EQ(v.sequence().size(), 5);
    for (int c = 0; c < 5; ++c) {
      ExpectTensor<float>(v.sequence().at(c), keepdims ? Shape{2, 1} : Shape{2}, Columns(c, 1));
    }
  }
  // Axis 0, negative spelling: the two rows.
  RuntimeValue rows =
      OpTest("SplitToSequence", 11).Input(TwoByFive()).Attr(IntAttr("axis", -2)).RunOneValue();
  ASSERT_TRUE(rows.is_sequence());
  ASSERT_EQ(rows.sequence().size(), 2);
  ExpectTensor<float>(rows.sequence().at(1), Shape{1, 5}, {5, 6, 7, 8, 9});
}

TEST(SequenceKernelsTest, SplitToSequenceWithScalarAndListSplits) {
  // A scalar 2 over 5 columns: 2, 2 and the remaining 1. keepdims does not apply.
  RuntimeValue v = OpTest("SplitToSequence", 11)
                       .Input(TwoByFive())
                       .Input(MakeTensor<int64_t>(Shape{}, {2}))
                       .Attr(IntAttr("axis", 1))
                       .Attr(IntAttr("keepdims", 0))
                       .RunOneValue();
  ASSERT_TRUE(v.is_sequence());
  ASSERT_EQ(v.sequence().size(), 3);
  ExpectTensor<float>(v.sequence().at(0), Shape{2, 2}, Columns(0, 2));
  ExpectTensor<float>(v.sequence().at(1), Shape{2, 2}, Columns(2, 2));
  ExpectTensor<float>(v.sequence().at(2), Shape{2, 1}, Columns(4, 1));

  // A list [1, 0, 4] (int32): a zero-length piece is kept.
  v = OpTest("SplitToSequence", 11)
          .Input(TwoByFive())
          .Input(MakeTensor<int32_t>(Shape{3}, {1, 0, 4}))
          .Attr(IntAttr("axis", 1))
          .RunOneValue();
  ASSERT_TRUE(v.is_sequence());
  ASSERT_EQ(v.sequence().size(), 3);
  ExpectTensor<float>(v.sequence().at(0), Shape{2, 1}, Columns(0, 1));
  ExpectTensor<float>(v.sequence().at(1), Shape{2, 0}, {});
  ExpectTensor<float>(v.sequence().at(2), Shape{2, 4}, Columns(1, 4));

  auto split_error = [](OwnedTensor split) {
    return OpTest("SplitToSequence", 11)
        .Input(TwoByFive())
        .Input(std::move(split))
        .Attr(IntAttr("axis", 1))
        .RunValuesStatus();
  };
  ExpectInvalid(split_error(MakeTensor<int64_t>(Shape{2}, {2, 2})),
                {"SplitToSequence", "add up to 4, not the axis length 5"});
  ExpectInvalid(split_error(MakeTensor<int64_t>(Shape{2}, {6, -1})),
                {"SplitToSequence", "exceed the axis length 5"});
  ExpectInvalid(split_error(MakeTensor<int64_t>(Shape{2}, {-1, 6})),
                {"SplitToSequence", "split length -1 is negative"});
  ExpectInvalid(split_error(MakeTensor<int64_t>(Shape{}, {0})),
                {"SplitToSequence", "split length 0 must be positive"});
  ExpectInvalid(split_error(MakeTensor<float>(Shape{}, {1})),
                {"SplitToSequence", "'split' must be an INT32 or INT64"});
  ExpectInvalid(
      OpTest("SplitToSequence", 11).Input(TwoByFive()).Attr(IntAttr("axis", 2)).RunValuesStatus(),
      {"SplitToSequence", "axis 2 is out of range [-2, 1]"});
  ExpectInvalid(
      OpTest("SplitToSequence", 11).Input(TwoByFive()).Attr(IntAttr("keepdims", 2)).Create(),
      {"SplitToSequence", "'keepdims' must be 0 or 1"});
}

TEST(SequenceKernelsTest, ConcatFromSequenceJoinsAlongAnAxis) {
  // Splitting then concatenating along the same axis gives the input back.
  for (int axis : {0, 1, -1}) {
    RuntimeValue parts = OpTest("SplitToSequence", 11)
                             .Input(TwoByFive())
                             .Input(MakeTensor<int64_t>(Shape{}, {2}))
                             .Attr(IntAttr("axis", axis))
                             .RunOneValue();
    RuntimeValue joined = OpTest("ConcatFromSequence", 11)
                              .ValueInput(parts)
                              .Attr(IntAttr("axis", axis))
                              .RunOneValue();
    ASSERT_TRUE(joined.is_tensor()) << axis;
    ExpectTensor<float>(joined.tensor(), Shape{2, 5}, Columns(0, 5));
  }
  // Different lengths on the axis: [2,1] and [2,2] along axis 1.
  std::vector<OwnedTensor> elements = {MakeTensor<float>(Shape{2, 1}, {1, 2}),
                                       MakeTensor<float>(Shape{2, 2}, {3, 4, 5, 6})};
  RuntimeValue seq(TensorSequence::Create(DataType::kFloat32, elements).value());
  RuntimeValue joined =
      OpTest("ConcatFromSequence", 11).ValueInput(seq).Attr(IntAttr("axis", 1)).RunOneValue();
  ASSERT_TRUE(joined.is_tensor());
  ExpectTensor<float>(joined.tensor(), Shape{2, 3}, {1, 3, 4, 2, 5, 6});

  ExpectInvalid(
      OpTest("ConcatFromSequence", 11).ValueInput(seq).Attr(IntAttr("axis", 0)).RunValuesStatus(),
      {"ConcatFromSequence", "element 1 has shape [2,2]"});
  ExpectInvalid(OpTest("ConcatFromSequence", 11)
                    .ValueInput(RuntimeValue(TensorSequence(DataType::kFloat32)))
                    .Attr(IntAttr("axis", 0))
                    .RunValuesStatus(),
                {"ConcatFromSequence", "cannot concatenate an empty sequence"});
  ExpectInvalid(OpTest("ConcatFromSequence", 11).ValueInput(seq).Create(),
                {"ConcatFromSequence", "'axis' is missing"});
  ExpectInvalid(
      OpTest("ConcatFromSequence", 11).ValueInput(seq).Attr(IntAttr("axis", 2)).RunValuesStatus(),
      {"ConcatFromSequence", "axis 2 is out of range [-2, 1]"});
}

TEST(SequenceKernelsTest, ConcatFromSequenceWithNewAxisStacks) {
  // Three [2,3] elements e_k[i][j] = 100k + 10i + j, stacked at every axis of the [.,.,.] result.
  std::vector<OwnedTensor> elements;
  for (int k = 0; k < 3; ++k) {
    std::vector<float> v;
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) v.push_back(static_cast<float>(100 * k + 10 * i + j));
    }
    elements.push_back(MakeTensor<float>(Shape{2, 3}, v));
  }
  RuntimeValue seq(TensorSequence::Create(DataType::kFloat32, elements).value());
  struct Case {
    int axis;
    Shape shape;
  };
  for (const Case& c : {Case{0, Shape{3, 2, 3}}, Case{1, Shape{2, 3, 3}}, Case{2, Shape{2, 3, 3}},
                        Case{-1, Shape{2, 3, 3}}, Case{-3, Shape{3, 2, 3}}}) {
    RuntimeValue out = OpTest("ConcatFromSequence", 11)
                           .ValueInput(seq)
                           .Attr(IntAttr("axis", c.axis))
                           .Attr(IntAttr("new_axis", 1))
                           .RunOneValue();
    ASSERT_TRUE(out.is_tensor()) << c.axis;
    const int axis = c.axis < 0 ? c.axis + 3 : c.axis;
    std::vector<float> want;
    for (int a = 0; a < c.shape.dim(0); ++a) {
      for (int b = 0; b < c.shape.dim(1); ++b) {
        for (int d = 0; d < c.shape.dim(2); ++d) {
          // Index (a, b, d) with the stacking index at `axis` and (i, j) in the other two.
          const int idx[3] = {a, b, d};
          int k = idx[axis], rest[2], n = 0;
          for (int q = 0; q < 3; ++q) {
            if (q != axis) rest[n++] = idx[q];
          }
          want.push_back(static_cast<float>(100 * k + 10 * rest[0] + rest[1]));
        }
      }
    }
    ExpectTensor<float>(out.tensor(), c.shape, want);
  }
  ExpectInvalid(OpTest("ConcatFromSequence", 11)
                    .ValueInput(seq)
                    .Attr(IntAttr("axis", 3))
                    .Attr(IntAttr("new_axis", 1))
                    .RunValuesStatus(),
                {"ConcatFromSequence", "axis 3 is out of range [-3, 2]"});
}

// ---------------------------------------------------------------------------------------------
// Optionals and Identity.

Attribute TypeAttr(ValueType t) {
  Attribute a;
  a.name = "type";
  a.type = AttributeType::kTypeProto;
  a.tp = std::make_shared<const ValueType>(std::move(t));
  return a;
}

TEST(OptionalKernelsTest, OptionalWrapsItsInputOrMakesNone) {
  RuntimeValue t =
      OpTest("Optional", 15).Input(MakeTensor<int32_t>(Shape{2}, {4, 5})).RunOneValue();
  ASSERT_TRUE(t.is_tensor());
  ExpectTensor<int32_t>(t.tensor(), Shape{2}, {4, 5});

  RuntimeValue s = OpTest("Optional", 15).ValueInput(FloatSeq({{1}, {2}})).RunOneValue();
  EXPECT_EQ(Firsts(s), (std::vector<float>{1, 2}));

  RuntimeValue none = OpTest("Optional", 15)
                          .OmittedInput()
                          .Attr(TypeAttr(SeqType(DataType::kFloat32)))
                          .RunOneValue();
  EXPECT_TRUE(none.is_none());

  ExpectInvalid(OpTest("Optional", 15).OmittedInput().Create(),
                {"Optional", "the attribute 'type' must say"});
  ExpectInvalid(OpTest("Optional", 15).OmittedInput().Attr(IntAttr("type", 1)).Create(),
                {"Optional", "'type' must be a TYPE_PROTO"});
}

TEST(OptionalKernelsTest, OptionalHasElementIsFalseOnlyForNone) {
  struct Case {
    RuntimeValue value;
    bool want;
  };
  const Case cases[] = {{RuntimeValue::None(), false},
                        {RuntimeValue(MakeTensor<float>(Shape{0}, {})), true},
                        {RuntimeValue(TensorSequence(DataType::kInt8)), true},
                        {FloatSeq({{1}}), true}};
  for (const Case& c : cases) {
    RuntimeValue out = OpTest("OptionalHasElement", 15).ValueInput(c.value).RunOneValue();
    ASSERT_TRUE(out.is_tensor()) << c.value.Describe();
    ExpectTensor<bool>(out.tensor(), Shape{}, {c.want});
  }
  ExpectInvalid(OpTest("OptionalHasElement", 15).OmittedInput().Create(),
                {"OptionalHasElement", "required input 0"});
}

TEST(OptionalKernelsTest, OptionalGetElementUnwrapsOrFailsOnNone) {
  RuntimeValue t = OpTest("OptionalGetElement", 15)
                       .ValueInput(RuntimeValue(MakeTensor<float>(Shape{3}, {1, 2, 3})),
                                   ValueType::Optional(TensorType(DataType::kFloat32)))
                       .RunOneValue();
  ASSERT_TRUE(t.is_tensor());
  ExpectTensor<float>(t.tensor(), Shape{3}, {1, 2, 3});

  const RuntimeValue seq = FloatSeq({{7}, {8}});
  RuntimeValue s = OpTest("OptionalGetElement", 15)
                       .ValueInput(seq, ValueType::Optional(SeqType(DataType::kFloat32)))
                       .RunOneValue();
  EXPECT_EQ(Firsts(s), (std::vector<float>{7, 8}));

  ExpectInvalid(
      OpTest("OptionalGetElement", 15)
          .ValueInput(RuntimeValue::None(), ValueType::Optional(TensorType(DataType::kFloat32)))
          .RunValuesStatus(),
      {"OptionalGetElement", "the optional input is empty (none)"});
}

TEST(IdentityOnValuesTest, PassesSequencesAndNonesOnAndCopiesTensors) {
  const RuntimeValue seq = FloatSeq({{1, 2}, {3}});
  RuntimeValue s = OpTest("Identity", 14).ValueInput(seq).RunOneValue();
  ASSERT_TRUE(s.is_sequence());
  ASSERT_EQ(s.sequence().size(), 2);
  EXPECT_EQ(s.sequence().at(0).raw_data(), seq.sequence().at(0).raw_data());
  ExpectTensor<float>(s.sequence().at(0), Shape{2}, {1, 2});

  EXPECT_TRUE(OpTest("Identity", 16).ValueInput(RuntimeValue::None()).RunOneValue().is_none());

  OwnedTensor x = MakeTensor<int64_t>(Shape{2}, {5, 6});
  RuntimeValue t = OpTest("Identity", 16).Input(x).RunOneValue();
  ASSERT_TRUE(t.is_tensor());
  ExpectTensor<int64_t>(t.tensor(), Shape{2}, {5, 6});
  EXPECT_NE(t.tensor().raw_data(), x.raw_data());
  // The tensor Run of the same node works too.
  ExpectTensor<int64_t>(OpTest("Identity", 16).Input(x).RunOne(), Shape{2}, {5, 6});
}

}  // namespace
}  // namespace kiln::ref
