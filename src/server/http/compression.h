// SPDX-License-Identifier: Apache-2.0
#pragma once
// HTTP body compression (KSERVE-V2.md 1.14) over zlib: request `Content-Encoding` gzip (RFC 1952)
// or deflate (the zlib wrapper, RFC 1950, as Python's zlib.compress and curl send it), and the
// response coding chosen from `Accept-Encoding`.
//
//   std::optional<ContentCoding> coding = ParseContentEncoding(req["Content-Encoding"]);
//   if (!coding) ...                                          // 501, Accept-Encoding: gzip,
//   deflate KILN_ASSIGN_OR_RETURN(std::string body, Decompress(raw, *coding, max_request_bytes));
//   ...
//   ContentCoding out = ChooseResponseCoding(req["Accept-Encoding"]);
//   Result<std::string> compressed = Compress(body, out);    // on error: send uncompressed
//
// Decompression stops as soon as the output passes the limit, so a small body that inflates to
// gigabytes (a zip bomb) costs at most max_bytes of memory. Thread safety: stateless functions.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace kiln {

enum class ContentCoding { kIdentity, kGzip, kDeflate };

// "gzip", "deflate"; "identity" for kIdentity.
std::string_view ContentCodingName(ContentCoding coding);

// A request's Content-Encoding: empty or "identity" -> kIdentity, "gzip" / "x-gzip" -> kGzip,
// "deflate" -> kDeflate (case-insensitive, surrounding spaces ignored); nullopt otherwise.
std::optional<ContentCoding> ParseContentEncoding(std::string_view value);

// The coding for a response given the request's Accept-Encoding: a comma-separated list with
// optional ";q=" weights; the highest-weighted of gzip, deflate and identity ("*" counts for
// gzip), ties in that order; kIdentity when the header is empty or names none of them.
ContentCoding ChooseResponseCoding(std::string_view accept_encoding);

// Inflates `data`. The output has at least `padding_bytes` of spare capacity past its size (so
// a JSON parser can read it in place). INVALID_ARGUMENT naming the coding for corrupt or
// truncated data, or for trailing bytes after the compressed stream, and for an output that
// would exceed max_bytes (naming the limit; nothing beyond max_bytes + padding_bytes is ever
// allocated). REQUIRES: coding != kIdentity.
Result<std::string> Decompress(std::string_view data, ContentCoding coding, size_t max_bytes,
                               size_t padding_bytes = 0);

// Compresses `data` (zlib's default level). INTERNAL when zlib fails. REQUIRES: coding !=
// kIdentity.
Result<std::string> Compress(std::string_view data, ContentCoding coding);

}  // namespace kiln
