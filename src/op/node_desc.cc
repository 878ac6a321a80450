// SPDX-License-Identifier: Apache-2.0
#include "op/node_desc.h"

#include <fmt/format.h>

namespace kiln {

OperandDesc OperandDesc::Of(ValueType declared) {
  OperandDesc d;
  d.present = true;
  d.type = std::move(declared);
  return d;
}

OperandDesc OperandDesc::Constant(std::shared_ptr<const OwnedTensor> data) {
  OperandDesc d;
  d.present = true;
  if (data != nullptr) d.type.dtype = data->dtype();
  d.constant = std::move(data);
  return d;
}

std::string NodeDesc::QualifiedOp() const {
  return domain.empty() ? op_type : fmt::format("{}.{}", domain, op_type);
}

}  // namespace kiln
