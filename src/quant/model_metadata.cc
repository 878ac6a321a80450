// SPDX-License-Identifier: Apache-2.0
// metadata_props at the protobuf wire level (model_metadata.h).

#include "quant/model_metadata.h"

#include <fmt/format.h>

namespace kiln::quant {
namespace {

constexpr uint32_t kMetadataField = 14;

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void PutBytesField(std::string& out, uint32_t field, std::string_view bytes) {
  PutVarint(out, (uint64_t{field} << 3) | 2);
  PutVarint(out, bytes.size());
  out.append(bytes);
}

bool GetVarint(std::string_view& in, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) return false;
    const uint8_t b = static_cast<uint8_t>(in[0]);
    in.remove_prefix(1);
    v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// Reads one field; `bytes` receives a length-delimited payload.
bool GetField(std::string_view& in, uint32_t& field, uint32_t& wire, std::string_view& bytes) {
  uint64_t tag = 0;
  if (!GetVarint(in, tag)) return false;
  field = static_cast<uint32_t>(tag >> 3);
  wire = static_cast<uint32_t>(tag & 7);
  uint64_t v = 0;
  switch (wire) {
    case 0:
      return GetVarint(in, v);
    case 1:
      if (in.size() < 8) return false;
      in.remove_prefix(8);
      return true;
    case 5:
      if (in.size() < 4) return false;
      in.remove_prefix(4);
      return true;
    case 2:
      if (!GetVarint(in, v) || v > in.size()) return false;
      bytes = in.substr(0, static_cast<size_t>(v));
      in.remove_prefix(static_cast<size_t>(v));
      return true;
    default:
      return false;
  }
}

}  // namespace

void AppendMetadata(std::string& model,
                    const std::vector<std::pair<std::string, std::string>>& entries) {
  for (const auto& [key, value] : entries) {
    std::string entry;
    PutBytesField(entry, 1, key);
    PutBytesField(entry, 2, value);
    PutBytesField(model, kMetadataField, entry);
  }
}

Result<std::map<std::string, std::string>> ReadMetadata(std::string_view model) {
  std::map<std::string, std::string> props;
  while (!model.empty()) {
    uint32_t field = 0, wire = 0;
    std::string_view bytes;
    if (!GetField(model, field, wire, bytes)) {
      return Status::InvalidArgument("the model file is not a well-formed ONNX (protobuf) message");
    }
    if (field != kMetadataField || wire != 2) continue;
    std::string key, value;
    while (!bytes.empty()) {
      uint32_t f = 0, w = 0;
      std::string_view s;
      if (!GetField(bytes, f, w, s)) {
        return Status::InvalidArgument("malformed metadata_props entry in the model file");
      }
      if (w != 2) continue;
      if (f == 1) key = std::string(s);
      if (f == 2) value = std::string(s);
    }
    props[key] = value;
  }
  return props;
}

std::string ContentHash(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

}  // namespace kiln::quant
