// SPDX-License-Identifier: Apache-2.0
// The streaming client's parsers: Server-Sent Events (split at every byte, CRLF / CR / LF,
// comments, multi-line data), chunked transfer decoding, response heads, and the reading of
// OpenAI stream chunks ([DONE], content, usage, error events).
#include "bench/gen_stream.h"

#include <gtest/gtest.h>

namespace kiln::bench {
namespace {

std::vector<SseEvent> ParseAll(std::string_view stream, std::vector<size_t> cuts) {
  SseParser p;
  std::vector<SseEvent> out;
  size_t at = 0;
  cuts.push_back(stream.size());
  for (size_t cut : cuts) {
    p.Feed(stream.substr(at, cut - at), out);
    at = cut;
  }
  return out;
}

TEST(SseParserTest, EventsSplitAnywhereGiveTheSameResult) {
  const std::string stream =
      "data: {\"choices\":[{\"text\":\"He\"}]}\r\n\r\n"
      ": keep-alive comment\r\n"
      "data: {\"choices\":[{\"text\":\"llo\"}]}\n\n"
      "event: error\r"
      "data: {\"error\":{\"message\":\"boom\"}}\r\r"
      "data: line one\r\n"
      "data:line two\r\n"
      "\r\n"
      "data: [DONE]\r\n\r\n";
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"", "{\"choices\":[{\"text\":\"He\"}]}"},
      {"", "{\"choices\":[{\"text\":\"llo\"}]}"},
      {"error", "{\"error\":{\"message\":\"boom\"}}"},
      {"", "line one\nline two"},
      {"", "[DONE]"}};
  auto check = [&](const std::vector<SseEvent>& got, const std::string& how) {
    ASSERT_EQ(got.size(), expected.size()) << how;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].type, expected[i].first) << how << " event " << i;
      EXPECT_EQ(got[i].data, expected[i].second) << how << " event " << i;
    }
  };
  check(ParseAll(stream, {}), "whole");
  for (size_t cut = 1; cut < stream.size(); ++cut) {
    check(ParseAll(stream, {cut}), "cut at " + std::to_string(cut));
  }
  std::vector<size_t> bytewise;
  for (size_t i = 1; i < stream.size(); ++i) bytewise.push_back(i);
  check(ParseAll(stream, bytewise), "byte by byte");
}

TEST(SseParserTest, CrThenLfInTheNextReadIsOneLineEnd) {
  // "\r" ends a read and "\n" starts the next: one line end, so the blank line that follows
  // dispatches exactly one event (a second line end would be read as the blank line too early).
  auto events = ParseAll("data: a\r\ndata: b\r\n\r\n", {8});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "a\nb");
}

TEST(SseParserTest, UnfinishedEventsAndEventsWithoutDataAreNotDispatched) {
  auto events = ParseAll("event: ping\n\nid: 3\nretry: 10\n\ndata: cut off", {});
  EXPECT_TRUE(events.empty());
  events = ParseAll("data\n\n", {});  // a field with no colon: empty data
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "");
}

TEST(ChunkedDecoderTest, DecodesAcrossEverySplit) {
  const std::string body =
      "5\r\nhello\r\n"
      "7;ext=1\r\n, world\r\n"
      "A\r\n0123456789\r\n"
      "0\r\nX-Trailer: 1\r\n\r\n";
  const std::string leftover = "HTTP/1.1 200";  // the next response
  const std::string all = body + leftover;
  for (size_t cut = 0; cut <= all.size(); ++cut) {
    ChunkedDecoder d;
    std::string out;
    int64_t used1 = d.Feed(std::string_view(all).substr(0, cut), out);
    ASSERT_GE(used1, 0) << cut;
    int64_t used2 = 0;
    if (!d.done()) {
      used2 = d.Feed(std::string_view(all).substr(cut), out);
      ASSERT_GE(used2, 0) << cut;
    }
    EXPECT_TRUE(d.done()) << cut;
    EXPECT_EQ(out, "hello, world0123456789") << cut;
    // Everything up to the end of the body was consumed, nothing of the next response.
    EXPECT_EQ(cut <= body.size() ? static_cast<size_t>(used1 + used2) : static_cast<size_t>(used1),
              body.size())
        << cut;
  }
}

TEST(ChunkedDecoderTest, MalformedFraming) {
  ChunkedDecoder a;
  std::string out;
  EXPECT_EQ(a.Feed("zz\r\n", out), -1);
  ChunkedDecoder b;
  EXPECT_EQ(b.Feed("2\r\nabX\r\n", out), -1);  // no CRLF after the chunk's data
  ChunkedDecoder c;
  EXPECT_EQ(c.Feed("\r\n", out), -1);  // an empty size line
}

TEST(ResponseHeadTest, Fields) {
  ResponseHead h;
  ASSERT_TRUE(ParseResponseHead(
      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
      "Transfer-Encoding: chunked\r\nContent-Length: 12\r\nConnection: Close\r\n\r\n",
      h));
  EXPECT_EQ(h.status, 200);
  EXPECT_TRUE(h.chunked);
  EXPECT_EQ(h.content_length, -1);  // chunked wins over Content-Length
  EXPECT_TRUE(h.close);
  EXPECT_EQ(h.content_type, "text/event-stream; charset=utf-8");
  ASSERT_TRUE(ParseResponseHead("HTTP/1.0 404 Not Found\nContent-Length: 31\n", h));
  EXPECT_EQ(h.status, 404);
  EXPECT_FALSE(h.chunked);
  EXPECT_EQ(h.content_length, 31);
  EXPECT_FALSE(h.close);
  EXPECT_FALSE(ParseResponseHead("HTTP/2 200\r\n", h));
  EXPECT_FALSE(ParseResponseHead("SSH-2.0-OpenSSH\r\n", h));
  EXPECT_FALSE(ParseResponseHead("HTTP/1.1 2x0 OK\r\n", h));
}

StreamChunk Read(const std::string& data, const std::string& type = "") {
  return ReadStreamChunk(SseEvent{type, data});
}

TEST(StreamChunkTest, Kinds) {
  EXPECT_EQ(Read("[DONE]").kind, StreamChunk::Kind::kDone);
  StreamChunk c = Read(R"({"id":"x","choices":[{"index":0,"text":"Hello","finish_reason":null}]})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kContent);
  EXPECT_EQ(c.text_bytes, 5);
  EXPECT_EQ(c.completion_tokens, -1);
  // Chat: the role-only first delta carries no text; content and reasoning do.
  EXPECT_EQ(Read(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})").kind,
            StreamChunk::Kind::kOther);
  c = Read(R"({"choices":[{"delta":{"content":"Hi"}}]})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kContent);
  EXPECT_EQ(c.text_bytes, 2);
  EXPECT_EQ(Read(R"({"choices":[{"delta":{"reasoning_content":"hmm"}}]})").kind,
            StreamChunk::Kind::kContent);
  // The usage chunk (stream_options.include_usage): empty choices.
  c = Read(
      R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kOther);
  EXPECT_EQ(c.prompt_tokens, 12);
  EXPECT_EQ(c.completion_tokens, 34);
  // Usage on a content chunk (vLLM's continuous usage stats), and "usage": null.
  c = Read(R"({"choices":[{"text":"a"}],"usage":{"prompt_tokens":1,"completion_tokens":2}})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kContent);
  EXPECT_EQ(c.completion_tokens, 2);
  EXPECT_EQ(Read(R"({"choices":[{"text":"a"}],"usage":null})").completion_tokens, -1);
}

TEST(StreamChunkTest, ErrorEvents) {
  StreamChunk c = Read(R"({"error":{"object":"error","message":"CUDA out of memory","code":500}})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kError);
  EXPECT_EQ(c.error, "CUDA out of memory");
  c = Read(R"({"error":"plain"})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kError);
  EXPECT_EQ(c.error, "plain");
  c = Read(R"({"message":"overloaded"})", "error");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kError);
  EXPECT_EQ(c.error, "overloaded");
  c = Read("the server broke", "error");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kError);
  EXPECT_EQ(c.error, "the server broke");
  EXPECT_EQ(Read(R"({"choices":[{"text":"x"}],"error":null})").kind, StreamChunk::Kind::kContent);
  c = Read("not json");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kInvalid);
  EXPECT_NE(c.error.find("not json"), std::string::npos);
}

}  // namespace
}  // namespace kiln::bench
