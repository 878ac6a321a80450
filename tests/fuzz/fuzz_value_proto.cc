// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: arbitrary bytes as a SequenceProto / OptionalProto value file, the way
// `kiln run` reads the inputs of a model with sequence or optional inputs. The first byte picks
// the declared type (which selects the message and types empty sequences); the rest is the file.
// ValueFromProtoBytes must return a value or an error Status, never crash; an accepted value must
// keep the sequence invariant and serialize and parse back. Run with `make fuzz`.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/check.h"
#include "graph/onnx/value_proto.h"

namespace {

kiln::ValueType Tensor(kiln::DataType dtype) {
  kiln::ValueType t;
  t.dtype = dtype;
  return t;
}

kiln::ValueType DeclaredType(uint8_t pick) {
  using kiln::DataType;
  using kiln::ValueType;
  switch (pick % 6) {
    case 0:
      return ValueType::Sequence(Tensor(DataType::kFloat32));
    case 1:
      return ValueType::Sequence(ValueType{});
    case 2:
      return ValueType::Optional(Tensor(DataType::kInt64));
    case 3:
      return ValueType::Optional(ValueType::Sequence(Tensor(DataType::kInt32)));
    case 4:
      return ValueType::Optional(ValueType{});
    default:
      return ValueType{};  // a TensorProto
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const kiln::ValueType type = DeclaredType(data[0]);
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  kiln::Result<kiln::RuntimeValue> v = kiln::ValueFromProtoBytes(bytes, type);
  if (!v.ok()) return 0;
  KILN_CHECK(v->valid(), "an accepted value is valid");
  if (v->is_sequence()) {
    for (const kiln::OwnedTensor& t : v->sequence().elements()) {
      KILN_CHECK(t.dtype() == v->sequence().elem_dtype(), "sequence element of another dtype");
    }
  }
  kiln::Result<std::string> out = kiln::ValueToProtoBytes(*v, type, "v");
  KILN_CHECK(out.ok(), "an accepted value serializes: ", out.status().ToString());
  kiln::Result<kiln::RuntimeValue> back = kiln::ValueFromProtoBytes(*out, type);
  KILN_CHECK(back.ok(), "a serialized value parses back: ", back.status().ToString());
  KILN_CHECK(back->kind() == v->kind(), "the value kind survives a round trip");
  return 0;
}
