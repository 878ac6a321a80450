// SPDX-License-Identifier: Apache-2.0
#pragma once
// The JSONL files of `kiln batch` (docs/batch.md): reading an input file row by row, the result
// line of each row, and what an existing output already holds (so a resumed run does not redo
// finished rows). No model and no threads here: the command (tools/kiln/batch_command.cc) runs
// the rows (batch_rows.h) and writes the lines.
//
// Two input formats, one request per non-blank line (row i is the i-th non-blank line, from 0):
//   kKserve  a KServe v2 inference request body, exactly as POSTed to /v2/models/M/infer
//            ({"id": ..., "inputs": [...], "outputs": [...], "parameters": {...}}).
//            Output line: {"row":N,"id":<the request's id or null>,"response":{...v2 response}}
//            or {"row":N,"id":...,"error":{"code":<HTTP status>,"message":"..."}}.
//   kOpenAi  OpenAI's Batch API input: {"custom_id":"...","method":"POST",
//            "url":"/v1/chat/completions" | "/v1/completions","body":{...request body...}}.
//            Output line, OpenAI's batch output format:
//            {"id":"batch_req_<row>","custom_id":"...","response":{"status_code":200,
//             "request_id":"<the response body's id>","body":{...}},"error":null}
//            or, for a row that failed, "response":null and "error":{"code":<HTTP status>,
//            "message","type","param"} (the server's OpenAI error object).
//
// Resuming: every output line names its row (kKserve: "row"; kOpenAi: "custom_id", or the row
// number in "id" when the line had no custom_id), so the rows an output already answers are
// known whatever order they finished in. A crash can leave only the last line torn (lines are
// written whole, in one write, with their '\n'): the bytes after the last '\n' are dropped and
// that row is redone. A complete line that is not a result line is an error naming its line.
//
//   KILN_ASSIGN_OR_RETURN(JsonlIndex index, IndexJsonlFile("in.jsonl", JsonlFormat::kOpenAi));
//   KILN_RETURN_IF_ERROR(CheckCustomIds(index));
//   KILN_ASSIGN_OR_RETURN(BatchOutputState done, ScanBatchOutputFile("out.jsonl", format));
//   KILN_RETURN_IF_ERROR(CheckOutputMatchesInput(done, index, "out.jsonl"));
//   truncate("out.jsonl", done.valid_bytes);  // drop a torn last line
//   for each row: if (!done.Done(row, index.custom_ids[row])) run it and append its line.
//
// Thread safety: plain functions and values; a JsonlReader may be read from any thread.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/result.h"

namespace kiln::batch {

enum class JsonlFormat { kKserve, kOpenAi };

// "kserve-jsonl" / "openai-jsonl" (the --format values).
std::string_view JsonlFormatName(JsonlFormat format);

// Which format one input line is in: an object with "custom_id", or with "url" and "body", is
// kOpenAi; one with "inputs" is kKserve. INVALID_ARGUMENT (naming what the line holds) otherwise.
Result<JsonlFormat> DetectJsonlFormat(std::string_view line);

// Where one row's line lies in its file.
struct JsonlLine {
  int64_t line_number = 0;  // 1-based line of the file (for messages)
  uint64_t offset = 0;      // byte offset of the line's first byte
  uint64_t length = 0;      // bytes, without the '\n' (and a '\r' before it)
};

struct JsonlIndex {
  std::vector<JsonlLine> lines;  // one per row: the non-blank lines, in order
  // kOpenAi: the custom_id of each row; nullopt where the line has none (not a JSON object, or
  // no string custom_id: that row fails with its reason). Empty for kKserve.
  std::vector<std::optional<std::string>> custom_ids;
  // The format detected from the first line that is a JSON object with a known shape; nullopt
  // when no line is.
  std::optional<JsonlFormat> detected;
};

// Lists the rows of the JSONL file at `path` (a UTF-8 byte-order mark before the first line is
// skipped). With `format` kOpenAi (or nullopt: detect it) each line is parsed once to read its
// custom_id. NOT_FOUND / INVALID_ARGUMENT naming the path when it cannot be opened or read.
Result<JsonlIndex> IndexJsonlFile(const std::string& path, std::optional<JsonlFormat> format);

// INVALID_ARGUMENT naming the custom_id and both line numbers for the first custom_id given on
// two lines.
Status CheckCustomIds(const JsonlIndex& index);

// Reads rows of an indexed file. Create fails as IndexJsonlFile does.
class JsonlReader {
 public:
  static Result<std::unique_ptr<JsonlReader>> Create(const std::string& path);
  ~JsonlReader();
  JsonlReader(const JsonlReader&) = delete;
  JsonlReader& operator=(const JsonlReader&) = delete;
  // The text of `line`. INVALID_ARGUMENT naming the file when it cannot be read (it changed).
  Result<std::string> Read(const JsonlLine& line) const;

 private:
  JsonlReader(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  const std::string path_;
  const int fd_;
};

// ---- Output lines (each ends in '\n') ----

// kKserve: `response_json` is the v2 response body; `id` the request's id (nullopt: null).
std::string KserveResultLine(int64_t row, const std::optional<std::string>& id,
                             std::string_view response_json);
std::string KserveErrorLine(int64_t row, const std::optional<std::string>& id, const Status& error);

// kOpenAi: `body_json` is the response body (status_code 200); `request_id` its id.
std::string OpenAiResultLine(int64_t row, const std::optional<std::string>& custom_id,
                             std::string_view request_id, std::string_view body_json);
// `param` is the request field the error is about (OpenAI's "param"; empty: null).
std::string OpenAiErrorLine(int64_t row, const std::optional<std::string>& custom_id,
                            const Status& error, std::string_view param);

// The string member `key` of the JSON object `json`; nullopt when `json` is not an object or
// has no such string member.
std::optional<std::string> PeekStringMember(std::string_view json, std::string_view key);

// ---- What an existing output holds ----

struct BatchOutputState {
  std::unordered_set<int64_t> rows;  // kKserve rows; kOpenAi rows written without a custom_id
  std::unordered_set<std::string> custom_ids;  // kOpenAi
  int64_t succeeded = 0;
  int64_t failed = 0;
  uint64_t valid_bytes = 0;  // the whole result lines; truncate the file to this
  uint64_t torn_bytes = 0;   // bytes after the last '\n' (a line cut by a crash)

  int64_t lines() const { return succeeded + failed; }
  // Whether the row (with its custom_id, kOpenAi) has a result line.
  bool Done(int64_t row, const std::optional<std::string>& custom_id) const;
};

// Reads output lines one at a time (ScanBatchOutput and ScanBatchOutputFile use it).
class BatchOutputScanner {
 public:
  explicit BatchOutputScanner(JsonlFormat format) : format_(format) {}
  // One complete line (without its '\n'). INVALID_ARGUMENT naming the line number for a line
  // that is not a result line of `format`, or that repeats a row or custom_id. *failed (when
  // not null) tells whether the line records an error.
  Status AddLine(std::string_view line, bool* failed = nullptr);
  // The bytes after the last '\n'.
  void AddTornTail(uint64_t bytes) { state_.torn_bytes = bytes; }
  const BatchOutputState& state() const { return state_; }

 private:
  const JsonlFormat format_;
  int64_t line_number_ = 0;
  BatchOutputState state_;
};

// The state of the output `contents`.
Result<BatchOutputState> ScanBatchOutput(std::string_view contents, JsonlFormat format);
// The same for the file at `path`; errors name it.
Result<BatchOutputState> ScanBatchOutputFile(const std::string& path, JsonlFormat format);

// --retry-failed: rewrites the output at `path` with only its succeeded lines (a torn last
// line is dropped too), through a temporary file renamed over it, and returns the state of what
// is left. Errors as ScanBatchOutputFile, and INTERNAL naming the file when it cannot be
// rewritten (the output is then unchanged).
Result<BatchOutputState> DropFailedLines(const std::string& path, JsonlFormat format);

// INVALID_ARGUMENT naming `output` when it answers a row the input does not have (a row number
// past its end, an unknown custom_id): it belongs to another input.
Status CheckOutputMatchesInput(const BatchOutputState& state, const JsonlIndex& index,
                               std::string_view output);

}  // namespace kiln::batch
