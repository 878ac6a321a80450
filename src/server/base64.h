// SPDX-License-Identifier: Apache-2.0
#pragma once
// Base64 (RFC 4648 section 4, the standard alphabet) decoding for protocol fields that carry
// bytes in JSON: the "file:<path>" parameters of a model load request (KSERVE-V2.md 1.7).
//
//   KILN_ASSIGN_OR_RETURN(std::string bytes, DecodeBase64(text, "parameter 'file:1/model.onnx'"));
//
// Accepted: groups of four alphabet characters, the last group padded with '=' or left
// unpadded (2 or 3 characters). Refused, with INVALID_ARGUMENT naming `what` and the offset: any
// character outside the alphabet (whitespace and the URL-safe '-' '_' included), '=' anywhere but
// at the end, a final group of one character, and non-zero bits in the unused low bits of the
// last character (so every byte string has exactly one accepted encoding).
//
// Thread safety: stateless.

#include <string>
#include <string_view>

#include "base/result.h"

namespace kiln {

Result<std::string> DecodeBase64(std::string_view text, std::string_view what);

}  // namespace kiln
