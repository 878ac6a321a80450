// SPDX-License-Identifier: Apache-2.0
// ggml's names of its tensor types (the `type_name` of ggml's type traits), for messages and
// for printing a file's tensors.

#include "llm/ggml_type.h"

namespace kiln::llm {

std::string_view GgmlTypeName(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
      return "f32";
    case GgmlType::kF16:
      return "f16";
    case GgmlType::kQ4_0:
      return "q4_0";
    case GgmlType::kQ4_1:
      return "q4_1";
    case GgmlType::kQ5_0:
      return "q5_0";
    case GgmlType::kQ5_1:
      return "q5_1";
    case GgmlType::kQ8_0:
      return "q8_0";
    case GgmlType::kQ8_1:
      return "q8_1";
    case GgmlType::kQ2_K:
      return "q2_K";
    case GgmlType::kQ3_K:
      return "q3_K";
    case GgmlType::kQ4_K:
      return "q4_K";
    case GgmlType::kQ5_K:
      return "q5_K";
    case GgmlType::kQ6_K:
      return "q6_K";
    case GgmlType::kQ8_K:
      return "q8_K";
    case GgmlType::kIQ2_XXS:
      return "iq2_xxs";
    case GgmlType::kIQ2_XS:
      return "iq2_xs";
    case GgmlType::kIQ3_XXS:
      return "iq3_xxs";
    case GgmlType::kIQ1_S:
      return "iq1_s";
    case GgmlType::kIQ4_NL:
      return "iq4_nl";
    case GgmlType::kIQ3_S:
      return "iq3_s";
    case GgmlType::kIQ2_S:
      return "iq2_s";
    case GgmlType::kIQ4_XS:
      return "iq4_xs";
    case GgmlType::kI8:
      return "i8";
    case GgmlType::kI16:
      return "i16";
    case GgmlType::kI32:
      return "i32";
    case GgmlType::kI64:
      return "i64";
    case GgmlType::kF64:
      return "f64";
    case GgmlType::kIQ1_M:
      return "iq1_m";
    case GgmlType::kBF16:
      return "bf16";
    case GgmlType::kTQ1_0:
      return "tq1_0";
    case GgmlType::kTQ2_0:
      return "tq2_0";
  }
  return "";
}

}  // namespace kiln::llm
