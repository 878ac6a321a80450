// SPDX-License-Identifier: Apache-2.0
// The JSONL files of `kiln batch` (batch_jsonl.h).

#include "server/batch/batch_jsonl.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <simdjson.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "server/http/json_read.h"
#include "server/http/openai_json.h"
#include "server/json_writer.h"
#include "server/status_map.h"

namespace kiln::batch {
namespace {

namespace dom = simdjson::dom;
using json_read::AsInt64;
using json_read::AsString;

constexpr std::string_view kBatchRequestIdPrefix = "batch_req_";
constexpr size_t kReadChunkBytes = size_t{1} << 20;

bool IsBlank(std::string_view line) {
  for (char c : line) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '\f' && c != '\v') return false;
  }
  return true;
}

// The member `key` of `object`, or nullopt.
std::optional<dom::element> Member(const dom::element& object, std::string_view key) {
  dom::element value;
  if (object.at_key(key).get(value) != simdjson::SUCCESS) return std::nullopt;
  return value;
}

std::optional<std::string> StringMember(const dom::element& object, std::string_view key) {
  std::optional<dom::element> value = Member(object, key);
  if (!value.has_value() || value->type() != dom::element_type::STRING) return std::nullopt;
  return std::string(AsString(*value));
}

// The format of a parsed line, when its members say.
std::optional<JsonlFormat> FormatOf(const dom::element& root) {
  if (Member(root, "custom_id").has_value() ||
      (Member(root, "url").has_value() && Member(root, "body").has_value())) {
    return JsonlFormat::kOpenAi;
  }
  if (Member(root, "inputs").has_value()) return JsonlFormat::kKserve;
  return std::nullopt;
}

std::string ErrnoText() { return std::strerror(errno); }

void AppendOptionalString(std::string* out, const std::optional<std::string>& s) {
  if (s.has_value()) {
    AppendJsonString(out, *s);
  } else {
    *out += "null";
  }
}

void WriteOptionalString(JsonWriter& w, const std::optional<std::string>& s) {
  if (s.has_value()) {
    w.String(*s);
  } else {
    w.Null();
  }
}

// The row number in an id "batch_req_<row>", or -1.
int64_t RowOfBatchRequestId(std::string_view id) {
  if (id.substr(0, kBatchRequestIdPrefix.size()) != kBatchRequestIdPrefix) return -1;
  id.remove_prefix(kBatchRequestIdPrefix.size());
  int64_t row = -1;
  const auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), row);
  if (ec != std::errc() || end != id.data() + id.size() || id.empty() || row < 0) return -1;
  return row;
}

// Calls `on_line(text, terminated)` for each line of the file open as `f` (without its '\n'),
// `terminated` false for a last line without one. Returns the bytes read.
template <typename OnLine>
Result<uint64_t> ForEachLine(std::FILE* f, const std::string& path, OnLine on_line) {
  std::string pending;
  std::vector<char> chunk(kReadChunkBytes);
  uint64_t total = 0;
  for (;;) {
    const size_t n = std::fread(chunk.data(), 1, chunk.size(), f);
    if (n == 0) {
      if (std::ferror(f)) {
        return Status::InvalidArgument(fmt::format("cannot read '{}': {}", path, ErrnoText()));
      }
      break;
    }
    total += n;
    size_t start = 0;
    for (;;) {
      const void* nl = std::memchr(chunk.data() + start, '\n', n - start);
      if (nl == nullptr) break;
      const size_t end = static_cast<size_t>(static_cast<const char*>(nl) - chunk.data());
      if (pending.empty()) {
        KILN_RETURN_IF_ERROR(on_line(std::string_view(chunk.data() + start, end - start), true));
      } else {
        pending.append(chunk.data() + start, end - start);
        KILN_RETURN_IF_ERROR(on_line(std::string_view(pending), true));
        pending.clear();
      }
      start = end + 1;
    }
    pending.append(chunk.data() + start, n - start);
  }
  if (!pending.empty()) KILN_RETURN_IF_ERROR(on_line(std::string_view(pending), false));
  return total;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using UniqueFile = std::unique_ptr<std::FILE, FileCloser>;

Result<UniqueFile> OpenForReading(const std::string& path) {
  UniqueFile f(std::fopen(path.c_str(), "rb"));
  if (f == nullptr) {
    const std::string why = ErrnoText();
    if (errno == ENOENT) return Status::NotFound(fmt::format("'{}' does not exist", path));
    return Status::InvalidArgument(fmt::format("cannot open '{}': {}", path, why));
  }
  return f;
}

}  // namespace

std::string_view JsonlFormatName(JsonlFormat format) {
  return format == JsonlFormat::kKserve ? "kserve-jsonl" : "openai-jsonl";
}

Result<JsonlFormat> DetectJsonlFormat(std::string_view line) {
  dom::parser parser;
  dom::element root;
  KILN_RETURN_IF_ERROR(ParseJsonRequestBody(parser, line, &root, "the line"));
  std::optional<JsonlFormat> format = FormatOf(root);
  if (!format.has_value()) {
    return Status::InvalidArgument(
        "the line is neither a KServe v2 inference request (no \"inputs\") nor an OpenAI batch "
        "request (no \"custom_id\", \"url\" and \"body\")");
  }
  return *format;
}

Result<JsonlIndex> IndexJsonlFile(const std::string& path, std::optional<JsonlFormat> format) {
  KILN_ASSIGN_OR_RETURN(UniqueFile f, OpenForReading(path));
  JsonlIndex index;
  dom::parser parser;
  uint64_t offset = 0;
  int64_t line_number = 0;
  auto on_line = [&](std::string_view text, bool terminated) -> Status {
    ++line_number;
    const uint64_t line_offset = offset;
    offset += text.size() + (terminated ? 1 : 0);
    uint64_t skip = 0;
    if (line_number == 1 && text.substr(0, 3) == "\xEF\xBB\xBF") skip = 3;  // a byte-order mark
    text.remove_prefix(skip);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (IsBlank(text)) return Status::OK();
    index.lines.push_back({line_number, line_offset + skip, text.size()});
    const bool want_id = format != JsonlFormat::kKserve;
    const bool want_format = !format.has_value() && !index.detected.has_value();
    if (!want_id && !want_format) return Status::OK();
    dom::element root;
    const bool parsed = ParseJsonRequestBody(parser, text, &root).ok();
    if (parsed && want_format) index.detected = FormatOf(root);
    if (want_id) {
      index.custom_ids.push_back(parsed ? StringMember(root, "custom_id") : std::nullopt);
    }
    return Status::OK();
  };
  KILN_RETURN_IF_ERROR(ForEachLine(f.get(), path, on_line).status());
  // Detected as kKserve while custom ids were wanted: they mean nothing.
  if (format != JsonlFormat::kOpenAi && index.detected != JsonlFormat::kOpenAi) {
    index.custom_ids.clear();
  }
  return index;
}

Status CheckCustomIds(const JsonlIndex& index) {
  std::unordered_map<std::string_view, int64_t> seen;  // custom_id -> line number
  for (size_t i = 0; i < index.custom_ids.size(); ++i) {
    if (!index.custom_ids[i].has_value()) continue;
    const auto [it, added] = seen.emplace(*index.custom_ids[i], index.lines[i].line_number);
    if (!added) {
      return Status::InvalidArgument(
          fmt::format("custom_id '{}' is on line {} and again on line {}: each request of a "
                      "batch needs its own custom_id",
                      *index.custom_ids[i], it->second, index.lines[i].line_number));
    }
  }
  return Status::OK();
}

Result<std::unique_ptr<JsonlReader>> JsonlReader::Create(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const std::string why = ErrnoText();
    if (errno == ENOENT) return Status::NotFound(fmt::format("'{}' does not exist", path));
    return Status::InvalidArgument(fmt::format("cannot open '{}': {}", path, why));
  }
  return std::unique_ptr<JsonlReader>(new JsonlReader(path, fd));
}

JsonlReader::~JsonlReader() { ::close(fd_); }

Result<std::string> JsonlReader::Read(const JsonlLine& line) const {
  std::string text(line.length, '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::pread(fd_, text.data() + done, text.size() - done,
                              static_cast<off_t>(line.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Status::InvalidArgument(
          fmt::format("cannot read line {} of '{}': {}", line.line_number, path_,
                      n == 0 ? std::string("the file is shorter than it was") : ErrnoText()));
    }
    done += static_cast<size_t>(n);
  }
  return text;
}

std::string KserveResultLine(int64_t row, const std::optional<std::string>& id,
                             std::string_view response_json) {
  std::string out = fmt::format("{{\"row\":{},\"id\":", row);
  AppendOptionalString(&out, id);
  out += ",\"response\":";
  out += response_json;
  out += "}\n";
  return out;
}

std::string KserveErrorLine(int64_t row, const std::optional<std::string>& id,
                            const Status& error) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.KeyInt("row", row);
  w.Key("id");
  WriteOptionalString(w, id);
  w.Key("error");
  w.BeginObject();
  w.KeyInt("code", HttpStatusFor(error.code()));
  w.KeyString("message", error.message());
  w.EndObject();
  w.EndObject();
  out += '\n';
  return out;
}

std::string OpenAiResultLine(int64_t row, const std::optional<std::string>& custom_id,
                             std::string_view request_id, std::string_view body_json) {
  std::string out = fmt::format("{{\"id\":\"{}{}\",\"custom_id\":", kBatchRequestIdPrefix, row);
  AppendOptionalString(&out, custom_id);
  out += ",\"response\":{\"status_code\":200,\"request_id\":";
  AppendJsonString(&out, request_id);
  out += ",\"body\":";
  out += body_json;
  out += "},\"error\":null}\n";
  return out;
}

std::string OpenAiErrorLine(int64_t row, const std::optional<std::string>& custom_id,
                            const Status& error, std::string_view param) {
  const int code = HttpStatusFor(error.code());
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.KeyString("id", fmt::format("{}{}", kBatchRequestIdPrefix, row));
  w.Key("custom_id");
  WriteOptionalString(w, custom_id);
  w.Key("response");
  w.Null();
  w.Key("error");
  w.BeginObject();
  w.KeyInt("code", code);
  w.KeyString("message", error.message());
  w.KeyString("type", OpenAiErrorType(code));
  w.Key("param");
  if (param.empty()) {
    w.Null();
  } else {
    w.String(param);
  }
  w.EndObject();
  w.EndObject();
  out += '\n';
  return out;
}

std::optional<std::string> PeekStringMember(std::string_view json, std::string_view key) {
  dom::parser parser;
  dom::element root;
  if (!ParseJsonRequestBody(parser, json, &root).ok()) return std::nullopt;
  return StringMember(root, key);
}

bool BatchOutputState::Done(int64_t row, const std::optional<std::string>& custom_id) const {
  if (custom_id.has_value()) return custom_ids.count(*custom_id) > 0;
  return rows.count(row) > 0;
}

Status BatchOutputScanner::AddLine(std::string_view line, bool* failed_out) {
  ++line_number_;
  if (failed_out != nullptr) *failed_out = false;
  const uint64_t line_bytes = line.size() + 1;
  if (IsBlank(line)) {
    state_.valid_bytes += line_bytes;
    return Status::OK();
  }
  const auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(fmt::format("line {} is not a {} result line of kiln batch: {}",
                                               line_number_, JsonlFormatName(format_), why));
  };
  dom::parser parser;
  dom::element root;
  if (Status s = ParseJsonRequestBody(parser, line, &root, "it"); !s.ok()) {
    return bad(s.message());
  }
  bool failed = false;
  if (format_ == JsonlFormat::kKserve) {
    std::optional<dom::element> row = Member(root, "row");
    if (!row.has_value() || row->type() != dom::element_type::INT64 || AsInt64(*row) < 0) {
      return bad("no \"row\" number");
    }
    std::optional<dom::element> error = Member(root, "error");
    failed = error.has_value() && error->type() != dom::element_type::NULL_VALUE;
    if (!failed && !Member(root, "response").has_value())
      return bad("no \"response\" or \"error\"");
    if (!state_.rows.insert(AsInt64(*row)).second) {
      return bad(fmt::format("row {} has an earlier line", AsInt64(*row)));
    }
  } else {
    std::optional<dom::element> custom_id = Member(root, "custom_id");
    std::optional<std::string> id = StringMember(root, "id");
    if (!custom_id.has_value() || !id.has_value() ||
        (custom_id->type() != dom::element_type::STRING &&
         custom_id->type() != dom::element_type::NULL_VALUE)) {
      return bad("no \"id\" and \"custom_id\"");
    }
    std::optional<dom::element> error = Member(root, "error");
    failed = error.has_value() && error->type() != dom::element_type::NULL_VALUE;
    if (custom_id->type() == dom::element_type::STRING) {
      if (!state_.custom_ids.emplace(AsString(*custom_id)).second) {
        return bad(fmt::format("custom_id '{}' has an earlier line", AsString(*custom_id)));
      }
    } else {
      const int64_t row = RowOfBatchRequestId(*id);
      if (row < 0) return bad(fmt::format("no custom_id and an id '{}' that names no row", *id));
      if (!state_.rows.insert(row).second) {
        return bad(fmt::format("row {} has an earlier line", row));
      }
    }
  }
  ++(failed ? state_.failed : state_.succeeded);
  state_.valid_bytes += line_bytes;
  if (failed_out != nullptr) *failed_out = failed;
  return Status::OK();
}

Result<BatchOutputState> ScanBatchOutput(std::string_view contents, JsonlFormat format) {
  BatchOutputScanner scanner(format);
  size_t start = 0;
  for (;;) {
    const size_t nl = contents.find('\n', start);
    if (nl == std::string_view::npos) break;
    KILN_RETURN_IF_ERROR(scanner.AddLine(contents.substr(start, nl - start)));
    start = nl + 1;
  }
  scanner.AddTornTail(contents.size() - start);
  return scanner.state();
}

Result<BatchOutputState> ScanBatchOutputFile(const std::string& path, JsonlFormat format) {
  KILN_ASSIGN_OR_RETURN(UniqueFile f, OpenForReading(path));
  BatchOutputScanner scanner(format);
  auto on_line = [&](std::string_view text, bool terminated) -> Status {
    if (!terminated) {
      scanner.AddTornTail(text.size());
      return Status::OK();
    }
    Status s = scanner.AddLine(text);
    if (!s.ok()) return Status::InvalidArgument(fmt::format("output '{}': {}", path, s.message()));
    return Status::OK();
  };
  KILN_RETURN_IF_ERROR(ForEachLine(f.get(), path, on_line).status());
  return scanner.state();
}

Result<BatchOutputState> DropFailedLines(const std::string& path, JsonlFormat format) {
  KILN_ASSIGN_OR_RETURN(UniqueFile in, OpenForReading(path));
  const std::string tmp_path = path + ".retry.tmp";
  UniqueFile out(std::fopen(tmp_path.c_str(), "wb"));
  if (out == nullptr) {
    return Status::Internal(fmt::format("cannot create '{}': {}", tmp_path, ErrnoText()));
  }
  BatchOutputScanner all(format);   // every line: validation
  BatchOutputScanner kept(format);  // the lines kept
  bool write_failed = false;
  auto on_line = [&](std::string_view text, bool terminated) -> Status {
    if (!terminated) return Status::OK();  // a torn last line
    bool failed = false;
    if (Status s = all.AddLine(text, &failed); !s.ok()) {
      return Status::InvalidArgument(fmt::format("output '{}': {}", path, s.message()));
    }
    if (failed) return Status::OK();
    KILN_RETURN_IF_ERROR(kept.AddLine(text));
    write_failed |= std::fwrite(text.data(), 1, text.size(), out.get()) != text.size() ||
                    std::fputc('\n', out.get()) == EOF;
    return Status::OK();
  };
  Status scanned = ForEachLine(in.get(), path, on_line).status();
  write_failed |= std::fflush(out.get()) != 0 || ::fsync(fileno(out.get())) != 0;
  out.reset();
  if (scanned.ok() && write_failed) {
    scanned = Status::Internal(fmt::format("cannot write '{}': {}", tmp_path, ErrnoText()));
  }
  if (scanned.ok() && std::rename(tmp_path.c_str(), path.c_str()) != 0) {
    scanned = Status::Internal(
        fmt::format("cannot rename '{}' to '{}': {}", tmp_path, path, ErrnoText()));
  }
  if (!scanned.ok()) {
    std::remove(tmp_path.c_str());
    return scanned;
  }
  return kept.state();
}

Status CheckOutputMatchesInput(const BatchOutputState& state, const JsonlIndex& index,
                               std::string_view output) {
  const int64_t rows = static_cast<int64_t>(index.lines.size());
  for (int64_t row : state.rows) {
    if (row >= rows) {
      return Status::InvalidArgument(
          fmt::format("output '{}' has a result for row {} but the input has {} rows: it is "
                      "the output of another input",
                      output, row, rows));
    }
  }
  if (!state.custom_ids.empty()) {
    std::unordered_set<std::string_view> ids;
    for (const std::optional<std::string>& id : index.custom_ids) {
      if (id.has_value()) ids.insert(*id);
    }
    for (const std::string& id : state.custom_ids) {
      if (ids.count(id) == 0) {
        return Status::InvalidArgument(
            fmt::format("output '{}' has a result for custom_id '{}', which the input does not "
                        "have: it is the output of another input",
                        output, id));
      }
    }
  }
  return Status::OK();
}

}  // namespace kiln::batch
