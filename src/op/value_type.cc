// SPDX-License-Identifier: Apache-2.0
#include "op/value_type.h"

#include <fmt/format.h>

namespace kiln {

ValueType ValueType::Sequence(ValueType element) {
  ValueType t;
  t.kind = TypeKind::kSequence;
  t.elem = std::make_shared<const ValueType>(std::move(element));
  return t;
}

ValueType ValueType::Optional(ValueType contained) {
  ValueType t;
  t.kind = TypeKind::kOptional;
  t.elem = std::make_shared<const ValueType>(std::move(contained));
  return t;
}

std::string ValueType::ToString() const {
  if (kind != TypeKind::kTensor) {
    const char* name = kind == TypeKind::kSequence ? "seq" : "optional";
    return fmt::format("{}({})", name, elem ? elem->ToString() : std::string("?"));
  }
  std::string out(DataTypeName(dtype));
  if (!has_shape) return out + "[?]";
  out += "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ",";
    if (dims[i].known())
      out += std::to_string(dims[i].value);
    else if (!dims[i].symbol.empty())
      out += dims[i].symbol;
    else
      out += "?";
  }
  return out + "]";
}

}  // namespace kiln
