// SPDX-License-Identifier: Apache-2.0
// Tensor files by extension (tensor_file.h).

#include "graph/onnx/tensor_file.h"

#include <fmt/format.h>

#include "graph/onnx/file_io.h"
#include "graph/onnx/tensor_proto.h"
#include "graph/onnx/value_proto.h"
#include "tensor/npy.h"

namespace kiln {
namespace {

constexpr std::string_view kKind = "tensor file";

enum class TensorFileFormat { kProto, kNpy };

bool EndsWithNoCase(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  s = s.substr(s.size() - suffix.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = (s[i] >= 'A' && s[i] <= 'Z') ? static_cast<char>(s[i] - 'A' + 'a') : s[i];
    if (c != suffix[i]) return false;
  }
  return true;
}

Result<TensorFileFormat> FormatOf(const std::string& path) {
  if (EndsWithNoCase(path, ".pb")) return TensorFileFormat::kProto;
  if (EndsWithNoCase(path, ".npy")) return TensorFileFormat::kNpy;
  return Status::InvalidArgument(fmt::format(
      "tensor file '{}' has an unsupported extension; supported: .pb (onnx TensorProto), .npy",
      path));
}

}  // namespace

Result<OwnedTensor> ReadTensorFile(const std::string& path, std::string* name) {
  KILN_ASSIGN_OR_RETURN(TensorFileFormat format, FormatOf(path));
  KILN_ASSIGN_OR_RETURN(std::string bytes, onnx_internal::ReadWholeFile(path, kKind));
  const std::string context = fmt::format("tensor file '{}'", path);
  if (format == TensorFileFormat::kNpy) {
    Result<OwnedTensor> t = ReadNpy(bytes);
    if (!t.ok()) return t.status().WithContext(context);
    if (name != nullptr) name->clear();
    return t;
  }
  Result<OwnedTensor> t = TensorFromProtoBytes(bytes, name);
  if (!t.ok()) return t.status().WithContext(context);
  return t;
}

Status WriteTensorFile(const std::string& path, const Tensor& tensor, std::string_view name) {
  KILN_ASSIGN_OR_RETURN(TensorFileFormat format, FormatOf(path));
  Result<std::string> bytes =
      format == TensorFileFormat::kNpy ? WriteNpy(tensor) : TensorToProtoBytes(tensor, name);
  if (!bytes.ok()) return bytes.status().WithContext(fmt::format("tensor file '{}'", path));
  return onnx_internal::WriteWholeFile(path, *bytes, kKind);
}

Result<RuntimeValue> ReadValueFile(const std::string& path, const ValueType& type,
                                   std::string* name) {
  KILN_ASSIGN_OR_RETURN(TensorFileFormat format, FormatOf(path));
  if (format == TensorFileFormat::kNpy || (!type.is_sequence() && !type.is_optional())) {
    if (format == TensorFileFormat::kNpy && type.is_sequence()) {
      return Status::Unimplemented(fmt::format(
          "tensor file '{}': a .npy file holds one tensor, but the value is a {}; give a .pb "
          "SequenceProto",
          path, type.ToString()));
    }
    KILN_ASSIGN_OR_RETURN(OwnedTensor t, ReadTensorFile(path, name));
    return RuntimeValue(std::move(t));
  }
  KILN_ASSIGN_OR_RETURN(std::string bytes, onnx_internal::ReadWholeFile(path, kKind));
  Result<RuntimeValue> v = ValueFromProtoBytes(bytes, type, name);
  if (!v.ok()) return v.status().WithContext(fmt::format("tensor file '{}'", path));
  return v;
}

Status WriteValueFile(const std::string& path, const RuntimeValue& value, const ValueType& type,
                      std::string_view name) {
  KILN_ASSIGN_OR_RETURN(TensorFileFormat format, FormatOf(path));
  if (value.is_tensor() && (format == TensorFileFormat::kNpy || !type.is_optional())) {
    return WriteTensorFile(path, value.tensor().view(), name);
  }
  if (format == TensorFileFormat::kNpy) {
    return Status::Unimplemented(
        fmt::format("tensor file '{}': value '{}' is a {}, which a .npy file cannot hold; use .pb",
                    path, name, value.Describe()));
  }
  Result<std::string> bytes = ValueToProtoBytes(value, type, name);
  if (!bytes.ok()) return bytes.status().WithContext(fmt::format("tensor file '{}'", path));
  return onnx_internal::WriteWholeFile(path, *bytes, kKind);
}

}  // namespace kiln
