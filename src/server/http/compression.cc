// SPDX-License-Identifier: Apache-2.0
// gzip / deflate bodies with zlib (see compression.h).
#include "server/http/compression.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

namespace kiln {
namespace {

constexpr int kGzipWindowBits = 15 + 16;  // zlib: gzip wrapper
constexpr int kZlibWindowBits = 15;       // zlib wrapper (HTTP "deflate")
constexpr size_t kChunkBytes = 64 * 1024;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// The q value of one Accept-Encoding item's parameters ("q=0.5"); 1 when absent, -1 if bad.
double QValue(std::string_view params) {
  double q = 1.0;
  while (!params.empty()) {
    const size_t semi = params.find(';');
    std::string_view p = Trim(params.substr(0, semi));
    params = semi == std::string_view::npos ? std::string_view() : params.substr(semi + 1);
    if (p.size() >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
      p.remove_prefix(2);
      double v = 0;
      const auto r = std::from_chars(p.data(), p.data() + p.size(), v);
      if (r.ec != std::errc() || r.ptr != p.data() + p.size() || v < 0 || v > 1) return -1;
      q = v;
    }
  }
  return q;
}

}  // namespace

std::string_view ContentCodingName(ContentCoding coding) {
  switch (coding) {
    case ContentCoding::kGzip:
      return "gzip";
    case ContentCoding::kDeflate:
      return "deflate";
    case ContentCoding::kIdentity:
      break;
  }
  return "identity";
}

std::optional<ContentCoding> ParseContentEncoding(std::string_view value) {
  value = Trim(value);
  if (value.empty() || IEquals(value, "identity")) return ContentCoding::kIdentity;
  if (IEquals(value, "gzip") || IEquals(value, "x-gzip")) return ContentCoding::kGzip;
  if (IEquals(value, "deflate")) return ContentCoding::kDeflate;
  return std::nullopt;
}

ContentCoding ChooseResponseCoding(std::string_view accept_encoding) {
  double q_gzip = -1, q_deflate = -1, q_identity = -1, q_any = -1;
  while (!accept_encoding.empty()) {
    const size_t comma = accept_encoding.find(',');
    const std::string_view item = accept_encoding.substr(0, comma);
    accept_encoding =
        comma == std::string_view::npos ? std::string_view() : accept_encoding.substr(comma + 1);
    const size_t semi = item.find(';');
    const std::string_view name = Trim(item.substr(0, semi));
    const double q = semi == std::string_view::npos ? 1.0 : QValue(item.substr(semi + 1));
    if (IEquals(name, "gzip") || IEquals(name, "x-gzip")) {
      q_gzip = q;
    } else if (IEquals(name, "deflate")) {
      q_deflate = q;
    } else if (IEquals(name, "identity")) {
      q_identity = q;
    } else if (name == "*") {
      q_any = q;
    }
  }
  if (q_gzip < 0) q_gzip = q_any;
  const double best = std::max({q_gzip, q_deflate, q_identity});
  if (best <= 0) return ContentCoding::kIdentity;
  if (q_gzip == best) return ContentCoding::kGzip;
  if (q_deflate == best) return ContentCoding::kDeflate;
  return ContentCoding::kIdentity;
}

Result<std::string> Decompress(std::string_view data, ContentCoding coding, size_t max_bytes,
                               size_t padding_bytes) {
  const std::string_view name = ContentCodingName(coding);
  z_stream z{};
  if (inflateInit2(&z, coding == ContentCoding::kGzip ? kGzipWindowBits : kZlibWindowBits) !=
      Z_OK) {
    return Status::Internal("cannot initialize zlib");
  }
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  int rc = Z_OK;
  size_t produced = 0;
  // Inputs longer than uInt are fed in pieces.
  size_t fed = 0;
  while (true) {
    if (z.avail_in == 0 && fed < data.size()) {
      const size_t piece = std::min<size_t>(data.size() - fed, std::numeric_limits<uInt>::max());
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + fed));
      z.avail_in = static_cast<uInt>(piece);
      fed += piece;
    }
    if (produced == out.size()) {
      if (out.size() > max_bytes) break;  // one byte past the limit is enough to know
      // Grow geometrically, never past max_bytes + 1.
      const size_t grow = std::max(kChunkBytes, out.size());
      out.resize(std::min(out.size() + grow, max_bytes + 1));
    }
    z.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    z.avail_out = static_cast<uInt>(
        std::min<size_t>(out.size() - produced, std::numeric_limits<uInt>::max()));
    const uInt before = z.avail_out;
    rc = inflate(&z, Z_NO_FLUSH);
    produced += before - z.avail_out;
    if (rc == Z_STREAM_END) break;
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && fed == data.size()) break;  // truncated
    if (rc != Z_OK && rc != Z_BUF_ERROR) break;
  }
  const size_t unread = z.avail_in + (data.size() - fed);
  const char* zlib_message = z.msg;  // static strings in zlib
  inflateEnd(&z);
  if (produced > max_bytes) {
    return Status::InvalidArgument(fmt::format(
        "request body decompressed ({}) exceeds the limit of {} bytes", name, max_bytes));
  }
  if (rc != Z_STREAM_END) {
    return Status::InvalidArgument(fmt::format(
        "request body is not valid {} data ({})", name,
        rc == Z_BUF_ERROR || rc == Z_OK ? "truncated stream"
                                        : (zlib_message ? zlib_message : "corrupt stream")));
  }
  if (unread != 0) {
    return Status::InvalidArgument(
        fmt::format("request body has {} bytes after the end of the {} stream", unread, name));
  }
  out.resize(produced);
  out.reserve(produced + padding_bytes);
  return out;
}

Result<std::string> Compress(std::string_view data, ContentCoding coding) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED,
                   coding == ContentCoding::kGzip ? kGzipWindowBits : kZlibWindowBits, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return Status::Internal("cannot initialize zlib");
  }
  if (data.size() > std::numeric_limits<uInt>::max()) {
    deflateEnd(&z);
    return Status::Internal("response too large to compress");
  }
  std::string out(deflateBound(&z, static_cast<uLong>(data.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  const size_t produced = out.size() - z.avail_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return Status::Internal(fmt::format("zlib deflate failed ({})", rc));
  out.resize(produced);
  return out;
}

}  // namespace kiln
