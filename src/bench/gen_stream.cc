// SPDX-License-Identifier: Apache-2.0
#include "bench/gen_stream.h"

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace kiln::bench {
namespace {

constexpr size_t kMaxLineBytes = 8192;  // a chunk-size or trailer line longer than this is bad

bool IEqualsLower(std::string_view a, std::string_view lower) {
  if (a.size() != lower.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != lower[i]) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The message of an OpenAI error value: {"message": ...} or a plain string.
std::string ErrorMessage(simdjson::dom::element e, std::string_view raw) {
  std::string_view s;
  if (e.get(s) == simdjson::SUCCESS) return std::string(s);
  if (e["message"].get(s) == simdjson::SUCCESS) return std::string(s);
  return std::string(raw.substr(0, 300));
}

int64_t TextBytes(simdjson::dom::element e, const char* key) {
  std::string_view s;
  if (e[key].get(s) == simdjson::SUCCESS) return static_cast<int64_t>(s.size());
  return 0;
}

}  // namespace

bool ParseResponseHead(std::string_view head, ResponseHead& out) {
  out = ResponseHead{};
  size_t eol = head.find('\n');
  std::string_view status_line = Trim(head.substr(0, eol));
  if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." || status_line[8] != ' ') {
    return false;
  }
  auto [ptr, ec] = std::from_chars(status_line.data() + 9, status_line.data() + 12, out.status);
  if (ec != std::errc() || ptr != status_line.data() + 12 || out.status < 100 || out.status > 999) {
    return false;
  }
  while (eol != std::string_view::npos) {
    size_t start = eol + 1;
    eol = head.find('\n', start);
    std::string_view line = Trim(
        head.substr(start, eol == std::string_view::npos ? std::string_view::npos : eol - start));
    size_t colon = line.find(':');
    if (line.empty() || colon == std::string_view::npos) continue;
    std::string_view name = Trim(line.substr(0, colon));
    std::string value = Lower(Trim(line.substr(colon + 1)));
    if (IEqualsLower(name, "content-length")) {
      int64_t n = -1;
      auto [p, e] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (e == std::errc() && p == value.data() + value.size() && n >= 0) out.content_length = n;
    } else if (IEqualsLower(name, "transfer-encoding")) {
      if (value.find("chunked") != std::string::npos) out.chunked = true;
    } else if (IEqualsLower(name, "connection")) {
      if (value.find("close") != std::string::npos) out.close = true;
    } else if (IEqualsLower(name, "content-type")) {
      out.content_type = value;
    }
  }
  if (out.chunked) out.content_length = -1;  // RFC 9112 §6.3: chunked wins
  return true;
}

int64_t ChunkedDecoder::Feed(std::string_view in, std::string& out) {
  size_t i = 0;
  while (i < in.size() && state_ != State::kDone) {
    if (state_ == State::kData) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(left_, in.size() - i));
      out.append(in.data() + i, n);
      i += n;
      left_ -= n;
      if (left_ == 0) state_ = State::kDataEnd;
      continue;
    }
    // A line: the chunk size, the CRLF after a chunk's data, or a trailer line.
    size_t nl = in.find('\n', i);
    size_t end = nl == std::string_view::npos ? in.size() : nl;
    line_.append(in.data() + i, end - i);
    if (line_.size() > kMaxLineBytes) return -1;
    if (nl == std::string_view::npos) return static_cast<int64_t>(in.size());
    i = nl + 1;
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    switch (state_) {
      case State::kSize: {
        std::string_view size = line_;
        size = size.substr(0, size.find(';'));  // chunk extensions
        size = Trim(size);
        uint64_t n = 0;
        auto [p, e] = std::from_chars(size.data(), size.data() + size.size(), n, 16);
        if (size.empty() || e != std::errc() || p != size.data() + size.size()) return -1;
        left_ = n;
        state_ = n == 0 ? State::kTrailer : State::kData;
        break;
      }
      case State::kDataEnd:
        if (!line_.empty()) return -1;
        state_ = State::kSize;
        break;
      case State::kTrailer:
        if (line_.empty()) state_ = State::kDone;
        break;
      default:
        break;
    }
    line_.clear();
  }
  return static_cast<int64_t>(i);
}

void SseParser::Feed(std::string_view bytes, std::vector<SseEvent>& out) {
  size_t i = 0;
  while (i < bytes.size()) {
    if (skip_lf_) {
      skip_lf_ = false;
      if (bytes[i] == '\n') {
        ++i;
        continue;
      }
    }
    size_t end = bytes.find_first_of("\r\n", i);
    if (end == std::string_view::npos) {
      line_.append(bytes.data() + i, bytes.size() - i);
      return;
    }
    line_.append(bytes.data() + i, end - i);
    skip_lf_ = bytes[end] == '\r';
    i = end + 1;
    Line(line_, out);
    line_.clear();
  }
}

void SseParser::Line(std::string_view line, std::vector<SseEvent>& out) {
  if (line.empty()) {
    if (has_data_) out.push_back(std::move(event_));
    event_ = SseEvent{};
    has_data_ = false;
    return;
  }
  if (line[0] == ':') return;  // comment (keep-alive pings)
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) event_.data += '\n';
    event_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    event_.type = std::string(value);
  }
}

StreamChunk ReadStreamChunk(const SseEvent& event) {
  StreamChunk c;
  std::string_view data = Trim(event.data);
  while (!data.empty() && (data.front() == '\n' || data.front() == '\r')) data.remove_prefix(1);
  while (!data.empty() && (data.back() == '\n')) data.remove_suffix(1);
  if (data == "[DONE]") {
    c.kind = StreamChunk::Kind::kDone;
    return c;
  }
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(data.data(), data.size()).get(root) != simdjson::SUCCESS) {
    if (event.type == "error") {
      c.kind = StreamChunk::Kind::kError;
      c.error = std::string(data.substr(0, 300));
    } else {
      c.kind = StreamChunk::Kind::kInvalid;
      c.error = "stream event is not JSON: " + std::string(data.substr(0, 200));
    }
    return c;
  }
  simdjson::dom::element usage;
  if (root["usage"].get(usage) == simdjson::SUCCESS && usage.is_object()) {
    int64_t n = 0;
    if (usage["prompt_tokens"].get(n) == simdjson::SUCCESS) c.prompt_tokens = n;
    if (usage["completion_tokens"].get(n) == simdjson::SUCCESS) c.completion_tokens = n;
  }
  simdjson::dom::element error;
  if (root["error"].get(error) == simdjson::SUCCESS && !error.is_null()) {
    c.kind = StreamChunk::Kind::kError;
    c.error = ErrorMessage(error, data);
    return c;
  }
  if (event.type == "error") {
    c.kind = StreamChunk::Kind::kError;
    c.error = ErrorMessage(root, data);
    return c;
  }
  simdjson::dom::array choices;
  simdjson::dom::element first;
  if (root["choices"].get(choices) == simdjson::SUCCESS && choices.size() > 0 &&
      choices.at(0).get(first) == simdjson::SUCCESS) {
    int64_t bytes = TextBytes(first, "text");
    simdjson::dom::element delta;
    if (first["delta"].get(delta) == simdjson::SUCCESS && delta.is_object()) {
      bytes += TextBytes(delta, "content") + TextBytes(delta, "reasoning_content");
    }
    if (bytes > 0) {
      c.kind = StreamChunk::Kind::kContent;
      c.text_bytes = bytes;
    }
  }
  return c;
}

}  // namespace kiln::bench
