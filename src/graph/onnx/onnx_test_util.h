// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helpers that set attributes on ONNX NodeProtos, for tests that build models in code.

#include <cstdint>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace kiln::testing {

inline onnx::AttributeProto* AddAttribute(onnx::NodeProto* n, const std::string& name,
                                          onnx::AttributeProto::AttributeType type) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}

inline void SetInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  AddAttribute(n, name, onnx::AttributeProto::INT)->set_i(v);
}

inline void SetInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto* a = AddAttribute(n, name, onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

inline void SetFloat(onnx::NodeProto* n, const std::string& name, float v) {
  AddAttribute(n, name, onnx::AttributeProto::FLOAT)->set_f(v);
}

inline void SetString(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  AddAttribute(n, name, onnx::AttributeProto::STRING)->set_s(v);
}

inline void SetStrings(onnx::NodeProto* n, const std::string& name,
                       const std::vector<std::string>& v) {
  onnx::AttributeProto* a = AddAttribute(n, name, onnx::AttributeProto::STRINGS);
  for (const std::string& s : v) a->add_strings(s);
}

}  // namespace kiln::testing
