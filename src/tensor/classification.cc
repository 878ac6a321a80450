// SPDX-License-Identifier: Apache-2.0
// Top-k classification of an output tensor (see classification.h).
#include "tensor/classification.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace kiln {
namespace {

// One batch item's elements as sortable keys and their printed form.
template <typename T>
struct Reader {
  static double Key(const T& v) { return static_cast<double>(v); }
  static std::string Text(const T& v) { return std::to_string(v); }
};
template <>
struct Reader<Float16> {
  static double Key(const Float16& v) { return Float16ToFloat(v); }
  static std::string Text(const Float16& v) { return std::to_string(Float16ToFloat(v)); }
};
template <>
struct Reader<BFloat16> {
  static double Key(const BFloat16& v) { return BFloat16ToFloat(v); }
  static std::string Text(const BFloat16& v) { return std::to_string(BFloat16ToFloat(v)); }
};
template <>
struct Reader<bool> {
  static double Key(const bool& v) { return v ? 1.0 : 0.0; }
  static std::string Text(const bool& v) { return v ? "1" : "0"; }
};

// 64-bit integers are compared exactly (a double key would tie distinct large values).
template <typename T>
bool Greater(const T& a, const T& b) {
  if constexpr (std::is_integral_v<T>) {
    return a > b;
  } else {
    const double x = Reader<T>::Key(a), y = Reader<T>::Key(b);
    if (std::isnan(y)) return !std::isnan(x);
    if (std::isnan(x)) return false;
    return x > y;
  }
}

// Calls f(T{}) with the element type of a numeric dtype; false for BYTES and invalid.
template <typename F>
bool VisitNumeric(DataType dtype, F&& f) {
  switch (dtype) {
#define KILN_CLASSIFY_CASE(dtype, T) \
  case DataType::dtype:              \
    f(T{});                          \
    return true;
    KILN_CLASSIFY_CASE(kBool, bool)
    KILN_CLASSIFY_CASE(kUint8, uint8_t)
    KILN_CLASSIFY_CASE(kUint16, uint16_t)
    KILN_CLASSIFY_CASE(kUint32, uint32_t)
    KILN_CLASSIFY_CASE(kUint64, uint64_t)
    KILN_CLASSIFY_CASE(kInt8, int8_t)
    KILN_CLASSIFY_CASE(kInt16, int16_t)
    KILN_CLASSIFY_CASE(kInt32, int32_t)
    KILN_CLASSIFY_CASE(kInt64, int64_t)
    KILN_CLASSIFY_CASE(kFloat16, Float16)
    KILN_CLASSIFY_CASE(kFloat32, float)
    KILN_CLASSIFY_CASE(kFloat64, double)
    KILN_CLASSIFY_CASE(kBFloat16, BFloat16)
#undef KILN_CLASSIFY_CASE
    case DataType::kBytes:
    case DataType::kInvalid:
      break;
  }
  return false;
}

}  // namespace

Result<TopK> TopKIndices(const Tensor& output, int64_t class_count, bool batched) {
  if (class_count < 1) {
    return Status::InvalidArgument(
        fmt::format("classification count must be at least 1, got {}", class_count));
  }
  if (output.dtype() == DataType::kBytes || output.dtype() == DataType::kInvalid) {
    return Status::InvalidArgument(
        fmt::format("classification needs a numeric output, not {}", DataTypeName(output.dtype())));
  }
  if (batched && output.rank() == 0) {
    return Status::InvalidArgument("classification of a batched output needs a batch dimension");
  }
  TopK top;
  top.items = batched ? output.dim(0) : 1;
  const int64_t total = output.num_elements();
  const int64_t per_item = top.items == 0 ? 0 : total / top.items;
  top.k = std::min(class_count, per_item);
  top.indices.reserve(static_cast<size_t>(top.items * top.k));
  VisitNumeric(output.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* data = output.data<const T>();
    std::vector<int64_t> order(static_cast<size_t>(per_item));
    for (int64_t item = 0; item < top.items; ++item) {
      const T* p = data + item * per_item;
      std::iota(order.begin(), order.end(), int64_t{0});
      // The k best in a stable order (equal values by index): O(n log k).
      std::partial_sort(order.begin(), order.begin() + top.k, order.end(),
                        [p](int64_t a, int64_t b) {
                          if (Greater(p[a], p[b])) return true;
                          if (Greater(p[b], p[a])) return false;
                          return a < b;
                        });
      top.indices.insert(top.indices.end(), order.begin(), order.begin() + top.k);
    }
  });
  return top;
}

Result<double> MaxAbsDifference(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    return Status::InvalidArgument(fmt::format("datatypes differ: {} and {}",
                                               DataTypeName(a.dtype()), DataTypeName(b.dtype())));
  }
  if (a.shape() != b.shape()) {
    return Status::InvalidArgument(
        fmt::format("shapes differ: {} and {}", a.shape().ToString(), b.shape().ToString()));
  }
  double worst = 0;
  const int64_t n = a.num_elements();
  const bool numeric = VisitNumeric(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.data<const T>();
    const T* y = b.data<const T>();
    for (int64_t i = 0; i < n; ++i) {
      const double u = Reader<T>::Key(x[i]), v = Reader<T>::Key(y[i]);
      double d;
      if (std::isnan(u) || std::isnan(v)) {
        d = std::isnan(u) && std::isnan(v) ? 0.0 : std::numeric_limits<double>::infinity();
      } else {
        d = std::fabs(u - v);
      }
      worst = std::max(worst, d);
    }
  });
  if (!numeric) {
    return Status::InvalidArgument(
        fmt::format("a difference needs numeric tensors, not {}", DataTypeName(a.dtype())));
  }
  return worst;
}

Result<OwnedTensor> Classify(const Tensor& output, int64_t class_count, bool batched,
                             std::span<const std::string> labels) {
  KILN_ASSIGN_OR_RETURN(TopK top, TopKIndices(output, class_count, batched));
  return ClassStrings(output, top, batched, labels);
}

Result<OwnedTensor> ClassStrings(const Tensor& output, const TopK& top, bool batched,
                                 std::span<const std::string> labels) {
  const Shape shape = batched ? Shape{top.items, top.k} : Shape{top.k};
  KILN_ASSIGN_OR_RETURN(OwnedTensor result, OwnedTensor::Allocate(DataType::kBytes, shape));
  std::string* out = result.data<std::string>();
  const int64_t per_item = top.items == 0 ? 0 : output.num_elements() / top.items;
  VisitNumeric(output.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* data = output.data<const T>();
    for (int64_t item = 0; item < top.items; ++item) {
      for (int64_t j = 0; j < top.k; ++j) {
        const int64_t index = top.indices[static_cast<size_t>(item * top.k + j)];
        std::string s =
            Reader<T>::Text(data[item * per_item + index]) + ":" + std::to_string(index);
        if (static_cast<size_t>(index) < labels.size()) {
          s += ":" + labels[static_cast<size_t>(index)];
        }
        *out++ = std::move(s);
      }
    }
  });
  return result;
}

std::vector<std::string> ParseLabelFile(std::string_view contents) {
  std::vector<std::string> labels;
  while (!contents.empty()) {
    const size_t eol = contents.find('\n');
    std::string_view line = contents.substr(0, eol);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    labels.emplace_back(line);
    if (eol == std::string_view::npos) break;
    contents.remove_prefix(eol + 1);
  }
  return labels;
}

}  // namespace kiln
