// SPDX-License-Identifier: Apache-2.0
#include "server/base64.h"

#include <fmt/format.h>

#include <array>
#include <cstdint>

namespace kiln {
namespace {

constexpr std::array<int8_t, 256> MakeTable() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < kAlphabet.size(); ++i) {
    t[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  }
  return t;
}
constexpr std::array<int8_t, 256> kTable = MakeTable();

}  // namespace

Result<std::string> DecodeBase64(std::string_view text, std::string_view what) {
  // Padding: at most two '=' and only at the very end, completing a group of four.
  size_t data_len = text.size();
  while (data_len > 0 && text[data_len - 1] == '=' && text.size() - data_len < 2) --data_len;
  const size_t padding = text.size() - data_len;
  // Characters first, so the message points at the first one that does not belong.
  for (size_t i = 0; i < data_len; ++i) {
    if (kTable[static_cast<uint8_t>(text[i])] >= 0) continue;
    const unsigned char c = static_cast<unsigned char>(text[i]);
    return Status::InvalidArgument(fmt::format(
        "{}: invalid base64: character {} at offset {} is not in the base64 alphabet", what,
        c >= 0x20 && c < 0x7f ? fmt::format("'{}'", static_cast<char>(c))
                              : fmt::format("0x{:02x}", c),
        i));
  }
  if (padding > 0 && text.size() % 4 != 0) {
    return Status::InvalidArgument(fmt::format(
        "{}: invalid base64: '=' padding must complete a group of four characters", what));
  }
  if (data_len % 4 == 1) {
    return Status::InvalidArgument(fmt::format(
        "{}: invalid base64: {} characters leave a final group of one", what, data_len));
  }
  std::string out;
  out.reserve(data_len / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < data_len; ++i) {
    const int8_t v = kTable[static_cast<uint8_t>(text[i])];
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) {
    return Status::InvalidArgument(fmt::format(
        "{}: invalid base64: the last character has non-zero unused bits (not a canonical "
        "encoding)",
        what));
  }
  return out;
}

}  // namespace kiln
