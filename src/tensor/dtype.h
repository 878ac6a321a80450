// SPDX-License-Identifier: Apache-2.0
#pragma once
// DataType: the element types of kiln tensors, one per KServe v2 datatype (dtypes.inc is the
// single inventory). Conversions to and from the protocol strings ("FP32") and the config enum
// names ("TYPE_FP32"), element sizes, and 16-bit float conversions.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// IEEE 754 binary16, stored as its bit pattern.
struct Float16 {
  uint16_t bits = 0;
  friend bool operator==(Float16 a, Float16 b) { return a.bits == b.bits; }
};
// bfloat16 (upper half of an IEEE binary32), stored as its bit pattern.
struct BFloat16 {
  uint16_t bits = 0;
  friend bool operator==(BFloat16 a, BFloat16 b) { return a.bits == b.bits; }
};

enum class DataType : uint8_t {
  kInvalid = 0,
#define KILN_DTYPE(e, v, proto, cfg, size, ctype) e = v,
#include "tensor/dtypes.inc"
#undef KILN_DTYPE
};

inline constexpr int kNumDataTypes = 15;  // including kInvalid; values are 0..14

// Bytes per element in memory (sizeof(std::string) for kBytes, 0 for kInvalid).
size_t DataTypeSize(DataType dtype);
// Protocol name: "FP32", "BYTES", ...; "INVALID" for kInvalid.
std::string_view DataTypeName(DataType dtype);
// Config enum name: "TYPE_FP32", "TYPE_STRING", ...; "TYPE_INVALID" for kInvalid.
std::string_view DataTypeConfigName(DataType dtype);
// Parses a protocol name (case-sensitive, as the protocol requires).
std::optional<DataType> DataTypeFromName(std::string_view name);
// Parses a config enum name ("TYPE_FP32").
std::optional<DataType> DataTypeFromConfigName(std::string_view name);

bool IsFloatingPoint(DataType dtype);  // FP16, BF16, FP32, FP64
bool IsInteger(DataType dtype);        // signed and unsigned integers (not BOOL)

float Float16ToFloat(Float16 h);
Float16 FloatToFloat16(float f);  // round to nearest even
float BFloat16ToFloat(BFloat16 b);
BFloat16 FloatToBFloat16(float f);  // round to nearest even

// Maps a C++ element type to its DataType: DataTypeOf<float>() == DataType::kFloat32.
template <typename T>
constexpr DataType DataTypeOf();
#define KILN_DTYPE(e, v, proto, cfg, size, ctype) \
  template <>                                     \
  constexpr DataType DataTypeOf<ctype>() {        \
    return DataType::e;                           \
  }
#include "tensor/dtypes.inc"
#undef KILN_DTYPE

}  // namespace kiln
