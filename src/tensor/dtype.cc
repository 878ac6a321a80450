// SPDX-License-Identifier: Apache-2.0
#include "tensor/dtype.h"

#include <cstring>

namespace kiln {
namespace {

struct DTypeInfo {
  DataType dtype;
  std::string_view name;
  std::string_view config_name;
  size_t size;
};

constexpr DTypeInfo kInfos[] = {
    {DataType::kInvalid, "INVALID", "TYPE_INVALID", 0},
#define KILN_DTYPE(e, v, proto, cfg, size, ctype) {DataType::e, proto, cfg, size},
#include "tensor/dtypes.inc"
#undef KILN_DTYPE
};
static_assert(std::size(kInfos) == kNumDataTypes);

const DTypeInfo& Info(DataType dtype) {
  const auto i = static_cast<size_t>(dtype);
  return i < std::size(kInfos) ? kInfos[i] : kInfos[0];
}

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

size_t DataTypeSize(DataType dtype) { return Info(dtype).size; }
std::string_view DataTypeName(DataType dtype) { return Info(dtype).name; }
std::string_view DataTypeConfigName(DataType dtype) { return Info(dtype).config_name; }

std::optional<DataType> DataTypeFromName(std::string_view name) {
  for (const DTypeInfo& info : kInfos) {
    if (info.dtype != DataType::kInvalid && info.name == name) return info.dtype;
  }
  return std::nullopt;
}

std::optional<DataType> DataTypeFromConfigName(std::string_view name) {
  for (const DTypeInfo& info : kInfos) {
    if (info.dtype != DataType::kInvalid && info.config_name == name) return info.dtype;
  }
  return std::nullopt;
}

bool IsFloatingPoint(DataType d) {
  return d == DataType::kFloat16 || d == DataType::kBFloat16 || d == DataType::kFloat32 ||
         d == DataType::kFloat64;
}

bool IsInteger(DataType d) {
  switch (d) {
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32:
    case DataType::kUint64:
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
      return true;
    default:
      return false;
  }
}

float Float16ToFloat(Float16 h) {
  const uint32_t sign = (h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1f;
  uint32_t mant = h.bits & 0x3ffu;
  if (exp == 0x1f) return BitsFloat(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp != 0) return BitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return BitsFloat(sign);  // +-0
  // Subnormal: value = mant * 2^-24.
  const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

Float16 FloatToFloat16(float f) {
  const uint32_t u = FloatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return {static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0))};
  }
  if (abs >= 0x477ff000u) return {static_cast<uint16_t>(sign | 0x7c00u)};  // overflow -> inf
  if (abs < 0x38800000u) {                                        // result is subnormal or zero
    if (abs < 0x33000000u) return {static_cast<uint16_t>(sign)};  // < half of min subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24 bits to drop from the 24-bit mantissa
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return {static_cast<uint16_t>(sign | half)};
  }
  uint32_t half = ((abs >> 13) - (112u << 10));
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return {static_cast<uint16_t>(sign | half)};
}

float BFloat16ToFloat(BFloat16 b) { return BitsFloat(static_cast<uint32_t>(b.bits) << 16); }

BFloat16 FloatToBFloat16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((u >> 16) | 0x40u)};  // nan
  u += 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<uint16_t>(u >> 16)};
}

}  // namespace kiln
