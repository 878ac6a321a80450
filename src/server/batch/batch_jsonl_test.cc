// SPDX-License-Identifier: Apache-2.0
// The JSONL files of kiln batch: input index, result lines, resume state (batch_jsonl.h).

#include "server/batch/batch_jsonl.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace kiln::batch {
namespace {

namespace fs = std::filesystem;

// A file in a fresh temporary directory, removed with it.
class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    char tmpl[] = "/tmp/kiln_batch_jsonl_XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/file.jsonl";
    std::ofstream(path_, std::ios::binary) << contents;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

TEST(DetectJsonlFormatTest, TellsTheFormatsApart) {
  EXPECT_EQ(*DetectJsonlFormat(R"({"inputs":[]})"), JsonlFormat::kKserve);
  EXPECT_EQ(*DetectJsonlFormat(R"({"custom_id":"a","body":{}})"), JsonlFormat::kOpenAi);
  EXPECT_EQ(*DetectJsonlFormat(R"({"url":"/v1/completions","body":{}})"), JsonlFormat::kOpenAi);
  Result<JsonlFormat> neither = DetectJsonlFormat(R"({"prompt":"x"})");
  ASSERT_FALSE(neither.ok());
  EXPECT_NE(neither.status().message().find("neither"), std::string::npos);
  EXPECT_FALSE(DetectJsonlFormat("{not json").ok());
  EXPECT_FALSE(DetectJsonlFormat("[1,2]").ok());
}

TEST(IndexJsonlFileTest, ListsNonBlankLinesWithOffsets) {
  // A byte-order mark, CRLF endings, blank lines and a last line without '\n'.
  const std::string contents =
      "\xEF\xBB\xBF{\"inputs\":[1]}\r\n\n   \n{\"inputs\":[2]}\n\t\n{\"inputs\":[3]}";
  TempFile file(contents);
  Result<JsonlIndex> index = IndexJsonlFile(file.path(), std::nullopt);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  ASSERT_EQ(index->lines.size(), 3u);
  EXPECT_EQ(index->detected, JsonlFormat::kKserve);
  EXPECT_TRUE(index->custom_ids.empty());
  EXPECT_EQ(index->lines[0].line_number, 1);
  EXPECT_EQ(index->lines[1].line_number, 4);
  EXPECT_EQ(index->lines[2].line_number, 6);
  Result<std::unique_ptr<JsonlReader>> reader = JsonlReader::Create(file.path());
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(*(*reader)->Read(index->lines[0]), "{\"inputs\":[1]}");
  EXPECT_EQ(*(*reader)->Read(index->lines[1]), "{\"inputs\":[2]}");
  EXPECT_EQ(*(*reader)->Read(index->lines[2]), "{\"inputs\":[3]}");
}

TEST(IndexJsonlFileTest, ReadsCustomIds) {
  TempFile file(
      "not json\n"
      "{\"custom_id\":\"a\",\"url\":\"/v1/completions\",\"body\":{}}\n"
      "{\"custom_id\":7}\n"
      "{\"custom_id\":\"b\"}\n");
  Result<JsonlIndex> index = IndexJsonlFile(file.path(), std::nullopt);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(index->detected, JsonlFormat::kOpenAi);  // from the first line that parses
  ASSERT_EQ(index->custom_ids.size(), 4u);
  EXPECT_FALSE(index->custom_ids[0].has_value());
  EXPECT_EQ(index->custom_ids[1], "a");
  EXPECT_FALSE(index->custom_ids[2].has_value());
  EXPECT_EQ(index->custom_ids[3], "b");
  EXPECT_TRUE(CheckCustomIds(*index).ok());
}

TEST(IndexJsonlFileTest, LongLinesAcrossReadChunks) {
  const std::string big(3 << 20, 'x');
  TempFile file("{\"inputs\":\"" + big + "\"}\n{\"inputs\":1}\n");
  Result<JsonlIndex> index = IndexJsonlFile(file.path(), JsonlFormat::kKserve);
  ASSERT_TRUE(index.ok());
  ASSERT_EQ(index->lines.size(), 2u);
  EXPECT_EQ(index->lines[0].length, big.size() + 13);
  EXPECT_EQ(index->lines[1].offset, big.size() + 14);
}

TEST(IndexJsonlFileTest, MissingFileIsNotFoundNamingIt) {
  Result<JsonlIndex> index = IndexJsonlFile("/nonexistent/in.jsonl", std::nullopt);
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().code(), StatusCode::kNotFound);
  EXPECT_NE(index.status().message().find("/nonexistent/in.jsonl"), std::string::npos);
}

TEST(CheckCustomIdsTest, DuplicateNamesBothLines) {
  TempFile file("{\"custom_id\":\"a\"}\n\n{\"custom_id\":\"b\"}\n{\"custom_id\":\"a\"}\n");
  Result<JsonlIndex> index = IndexJsonlFile(file.path(), JsonlFormat::kOpenAi);
  ASSERT_TRUE(index.ok());
  Status s = CheckCustomIds(*index);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "custom_id 'a' is on line 1 and again on line 4: each request of a batch needs its "
            "own custom_id");
}

TEST(ResultLinesTest, Kserve) {
  EXPECT_EQ(KserveResultLine(3, "r\"1", R"({"outputs":[]})"),
            "{\"row\":3,\"id\":\"r\\\"1\",\"response\":{\"outputs\":[]}}\n");
  EXPECT_EQ(KserveResultLine(0, std::nullopt, "{}"), "{\"row\":0,\"id\":null,\"response\":{}}\n");
  EXPECT_EQ(KserveErrorLine(5, std::nullopt, Status::InvalidArgument("bad \"x\"")),
            "{\"row\":5,\"id\":null,\"error\":{\"code\":400,\"message\":\"bad \\\"x\\\"\"}}\n");
  EXPECT_EQ(KserveErrorLine(5, "a", Status::ResourceExhausted("full")),
            "{\"row\":5,\"id\":\"a\",\"error\":{\"code\":429,\"message\":\"full\"}}\n");
}

TEST(ResultLinesTest, OpenAi) {
  EXPECT_EQ(OpenAiResultLine(2, "req-1", "chatcmpl-9", R"({"id":"chatcmpl-9"})"),
            "{\"id\":\"batch_req_2\",\"custom_id\":\"req-1\",\"response\":{\"status_code\":200,"
            "\"request_id\":\"chatcmpl-9\",\"body\":{\"id\":\"chatcmpl-9\"}},\"error\":null}\n");
  EXPECT_EQ(OpenAiErrorLine(4, std::nullopt, Status::InvalidArgument("no"), ""),
            "{\"id\":\"batch_req_4\",\"custom_id\":null,\"response\":null,\"error\":{\"code\":400,"
            "\"message\":\"no\",\"type\":\"BadRequestError\",\"param\":null}}\n");
  EXPECT_EQ(OpenAiErrorLine(4, "c", Status::NotFound("gone"), "model"),
            "{\"id\":\"batch_req_4\",\"custom_id\":\"c\",\"response\":null,\"error\":{\"code\":404,"
            "\"message\":\"gone\",\"type\":\"NotFoundError\",\"param\":\"model\"}}\n");
}

TEST(PeekStringMemberTest, OnlyStringsOfObjects) {
  EXPECT_EQ(PeekStringMember(R"({"id":"x","n":1})", "id"), "x");
  EXPECT_FALSE(PeekStringMember(R"({"id":1})", "id").has_value());
  EXPECT_FALSE(PeekStringMember(R"(["id"])", "id").has_value());
  EXPECT_FALSE(PeekStringMember(R"({"id":"x")", "id").has_value());
}

TEST(ScanBatchOutputTest, KserveRowsAndATornTail) {
  const std::string good =
      KserveResultLine(4, "a", "{}") + KserveErrorLine(0, std::nullopt, Status::Internal("x"));
  const std::string contents = good + "{\"row\":7,\"id\":null,\"resp";
  Result<BatchOutputState> state = ScanBatchOutput(contents, JsonlFormat::kKserve);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->succeeded, 1);
  EXPECT_EQ(state->failed, 1);
  EXPECT_EQ(state->valid_bytes, good.size());
  EXPECT_EQ(state->torn_bytes, contents.size() - good.size());
  EXPECT_TRUE(state->Done(4, std::nullopt));
  EXPECT_TRUE(state->Done(0, std::nullopt));
  EXPECT_FALSE(state->Done(7, std::nullopt));  // torn: redone
}

TEST(ScanBatchOutputTest, OpenAiByCustomIdElseByRow) {
  const std::string contents = OpenAiResultLine(0, "a", "r", "{}") +
                               OpenAiErrorLine(1, std::nullopt, Status::InvalidArgument("x"), "") +
                               OpenAiErrorLine(2, "c", Status::InvalidArgument("y"), "url");
  Result<BatchOutputState> state = ScanBatchOutput(contents, JsonlFormat::kOpenAi);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->succeeded, 1);
  EXPECT_EQ(state->failed, 2);
  EXPECT_EQ(state->torn_bytes, 0u);
  EXPECT_TRUE(state->Done(9, std::string("a")));  // by custom_id, whatever the row
  EXPECT_TRUE(state->Done(1, std::nullopt));
  EXPECT_FALSE(state->Done(0, std::nullopt));
  EXPECT_FALSE(state->Done(1, std::string("b")));
}

TEST(ScanBatchOutputTest, ACorruptCompleteLineIsAnErrorNamingIt) {
  const std::string contents = KserveResultLine(0, std::nullopt, "{}") + "garbage\n";
  Result<BatchOutputState> state = ScanBatchOutput(contents, JsonlFormat::kKserve);
  ASSERT_FALSE(state.ok());
  EXPECT_NE(state.status().message().find("line 2 is not a kserve-jsonl result line"),
            std::string::npos)
      << state.status().message();
  // The other format's lines are not result lines either.
  EXPECT_FALSE(ScanBatchOutput(OpenAiResultLine(0, "a", "r", "{}"), JsonlFormat::kKserve).ok());
  EXPECT_FALSE(ScanBatchOutput(KserveResultLine(0, "a", "{}"), JsonlFormat::kOpenAi).ok());
}

TEST(ScanBatchOutputTest, RepeatedRowsAreErrors) {
  EXPECT_FALSE(ScanBatchOutput(KserveResultLine(1, std::nullopt, "{}") +
                                   KserveResultLine(1, std::nullopt, "{}"),
                               JsonlFormat::kKserve)
                   .ok());
  EXPECT_FALSE(
      ScanBatchOutput(OpenAiResultLine(0, "a", "r", "{}") + OpenAiResultLine(1, "a", "r", "{}"),
                      JsonlFormat::kOpenAi)
          .ok());
}

TEST(ScanBatchOutputTest, EmptyAndFile) {
  Result<BatchOutputState> empty = ScanBatchOutput("", JsonlFormat::kKserve);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->lines(), 0);
  EXPECT_EQ(empty->valid_bytes, 0u);
  const std::string good = KserveResultLine(2, std::nullopt, "{}");
  TempFile file(good + "{\"ro");
  Result<BatchOutputState> state = ScanBatchOutputFile(file.path(), JsonlFormat::kKserve);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->valid_bytes, good.size());
  EXPECT_EQ(state->torn_bytes, 4u);
  EXPECT_TRUE(state->Done(2, std::nullopt));
  TempFile bad(good + "[]\n");
  Result<BatchOutputState> failed = ScanBatchOutputFile(bad.path(), JsonlFormat::kKserve);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find(bad.path()), std::string::npos);
}

TEST(DropFailedLinesTest, KeepsOnlySucceededLines) {
  const std::string ok0 = OpenAiResultLine(0, "a", "r", "{}");
  const std::string ok2 = OpenAiResultLine(2, "c", "r", "{}");
  TempFile file(ok0 + OpenAiErrorLine(1, "b", Status::Unavailable("later"), "") + ok2 +
                OpenAiErrorLine(3, std::nullopt, Status::InvalidArgument("x"), "") + "{\"id\"");
  Result<BatchOutputState> state = DropFailedLines(file.path(), JsonlFormat::kOpenAi);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->succeeded, 2);
  EXPECT_EQ(state->failed, 0);
  EXPECT_TRUE(state->Done(0, std::string("a")));
  EXPECT_FALSE(state->Done(1, std::string("b")));
  EXPECT_FALSE(state->Done(3, std::nullopt));
  std::ifstream in(file.path(), std::ios::binary);
  const std::string rewritten((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
  EXPECT_EQ(rewritten, ok0 + ok2);
  EXPECT_FALSE(fs::exists(file.path() + ".retry.tmp"));
}

TEST(DropFailedLinesTest, ACorruptOutputIsLeftAlone) {
  const std::string contents = KserveErrorLine(0, std::nullopt, Status::Internal("x")) + "[]\n";
  TempFile file(contents);
  EXPECT_FALSE(DropFailedLines(file.path(), JsonlFormat::kKserve).ok());
  std::ifstream in(file.path(), std::ios::binary);
  const std::string after((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(after, contents);
  EXPECT_FALSE(fs::exists(file.path() + ".retry.tmp"));
}

TEST(CheckOutputMatchesInputTest, RowsAndCustomIdsMustBeTheInputs) {
  JsonlIndex index;
  index.lines.resize(2);
  index.custom_ids = {std::string("a"), std::nullopt};
  BatchOutputState state;
  state.rows = {1};
  state.custom_ids = {"a"};
  EXPECT_TRUE(CheckOutputMatchesInput(state, index, "out").ok());
  state.rows.insert(2);
  Status past = CheckOutputMatchesInput(state, index, "out");
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.message().find("row 2 but the input has 2 rows"), std::string::npos);
  state.rows = {0};
  state.custom_ids.insert("zz");
  Status unknown = CheckOutputMatchesInput(state, index, "out");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("custom_id 'zz'"), std::string::npos);
}

}  // namespace
}  // namespace kiln::batch
