// SPDX-License-Identifier: Apache-2.0
#include "tensor/classification.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace kiln {
namespace {

template <typename T>
OwnedTensor Make(DataType dtype, Shape shape, std::vector<T> values) {
  auto t = OwnedTensor::Allocate(dtype, shape);
  EXPECT_TRUE(t.ok());
  for (size_t i = 0; i < values.size(); ++i) t->template data<T>()[i] = values[i];
  return std::move(t).value();
}

std::vector<std::string> Strings(const OwnedTensor& t) {
  const std::string* p = t.data<std::string>();
  return {p, p + t.num_elements()};
}

TEST(ClassificationTest, TopKPerBatchItemWithLabels) {
  OwnedTensor t = Make<float>(DataType::kFloat32, Shape{2, 4},
                              {0.1f, 0.7f, 0.2f, 0.0f, /* item 1 */ 5.f, -1.f, 5.f, 9.f});
  const std::vector<std::string> labels = {"cat", "dog", "eel"};
  Result<OwnedTensor> r = Classify(t.view(), 2, /*batched=*/true, labels);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->dtype(), DataType::kBytes);
  EXPECT_EQ(r->shape(), (Shape{2, 2}));
  // Label 3 does not exist: no label suffix. Ties keep index order (0 before 2).
  EXPECT_EQ(Strings(*r), (std::vector<std::string>{"0.700000:1:dog", "0.200000:2:eel", "9.000000:3",
                                                   "5.000000:0:cat"}));
}

TEST(ClassificationTest, UnbatchedAndKLargerThanClasses) {
  OwnedTensor t = Make<int32_t>(DataType::kInt32, Shape{1, 3}, {4, -2, 10});
  Result<OwnedTensor> r = Classify(t.view(), 5, /*batched=*/false, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{3}));
  EXPECT_EQ(Strings(*r), (std::vector<std::string>{"10:2", "4:0", "-2:1"}));
}

TEST(ClassificationTest, HalfPrecisionAndLargeIntegers) {
  // FP16 bits: 0x3C00 = 1.0, 0xC000 = -2.0, 0x4200 = 3.0.
  OwnedTensor h = Make<Float16>(DataType::kFloat16, Shape{3},
                                {Float16{0x3C00}, Float16{0xC000}, Float16{0x4200}});
  Result<OwnedTensor> r = Classify(h.view(), 1, false, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Strings(*r), (std::vector<std::string>{"3.000000:2"}));
  // Distinct int64 values that one double cannot tell apart.
  OwnedTensor big =
      Make<int64_t>(DataType::kInt64, Shape{2}, {int64_t{1} << 60, (int64_t{1} << 60) + 1});
  r = Classify(big.view(), 1, false, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Strings(*r), (std::vector<std::string>{"1152921504606846977:1"}));
}

TEST(ClassificationTest, MaxAbsDifference) {
  OwnedTensor a = Make<float>(DataType::kFloat32, Shape{2, 2}, {1.f, -2.f, 3.f, 0.5f});
  OwnedTensor b = Make<float>(DataType::kFloat32, Shape{2, 2}, {1.5f, -2.f, 2.f, 0.5f});
  Result<double> d = MaxAbsDifference(a.view(), b.view());
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(*d, 1.0);  // |3 - 2|
  EXPECT_DOUBLE_EQ(*MaxAbsDifference(a.view(), a.view()), 0.0);
  // NaN against NaN is no difference; against a number, an infinite one.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  OwnedTensor n1 = Make<float>(DataType::kFloat32, Shape{2}, {nan, 1.f});
  OwnedTensor n2 = Make<float>(DataType::kFloat32, Shape{2}, {nan, 1.f});
  OwnedTensor n3 = Make<float>(DataType::kFloat32, Shape{2}, {0.f, 1.f});
  EXPECT_DOUBLE_EQ(*MaxAbsDifference(n1.view(), n2.view()), 0.0);
  EXPECT_TRUE(std::isinf(*MaxAbsDifference(n1.view(), n3.view())));
  // FP16 by value: 1.0 and 3.0.
  OwnedTensor h1 = Make<Float16>(DataType::kFloat16, Shape{1}, {Float16{0x3C00}});
  OwnedTensor h2 = Make<Float16>(DataType::kFloat16, Shape{1}, {Float16{0x4200}});
  EXPECT_DOUBLE_EQ(*MaxAbsDifference(h1.view(), h2.view()), 2.0);
  // Errors name what differs.
  OwnedTensor c = Make<float>(DataType::kFloat32, Shape{4}, {1.f, -2.f, 3.f, 0.5f});
  EXPECT_NE(
      std::string(MaxAbsDifference(a.view(), c.view()).status().message()).find("shapes differ"),
      std::string::npos);
  OwnedTensor i = Make<int32_t>(DataType::kInt32, Shape{2, 2}, {1, 2, 3, 4});
  EXPECT_NE(
      std::string(MaxAbsDifference(a.view(), i.view()).status().message()).find("datatypes differ"),
      std::string::npos);
}

TEST(ClassificationTest, NanRanksLast) {
  OwnedTensor t = Make<float>(DataType::kFloat32, Shape{3}, {std::nanf(""), -1.f, 2.f});
  Result<OwnedTensor> r = Classify(t.view(), 3, false, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Strings(*r)[0], "2.000000:2");
  EXPECT_EQ(Strings(*r)[1], "-1.000000:1");
}

TEST(ClassificationTest, Errors) {
  OwnedTensor s = Make<std::string>(DataType::kBytes, Shape{1}, {"x"});
  EXPECT_EQ(Classify(s.view(), 1, false, {}).status().code(), StatusCode::kInvalidArgument);
  OwnedTensor f = Make<float>(DataType::kFloat32, Shape{}, {1.f});
  EXPECT_EQ(Classify(f.view(), 0, false, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Classify(f.view(), 1, true, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Classify(f.view(), 1, false, {}).ok());
}

TEST(ClassificationTest, LabelFile) {
  EXPECT_EQ(ParseLabelFile("a\nb c\r\nd"), (std::vector<std::string>{"a", "b c", "d"}));
  EXPECT_EQ(ParseLabelFile("a\n"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(ParseLabelFile(""), (std::vector<std::string>{}));
}

}  // namespace
}  // namespace kiln
