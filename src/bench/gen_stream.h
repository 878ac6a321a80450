// SPDX-License-Identifier: Apache-2.0
#pragma once
// The byte-level parsers of `kiln bench generate`'s streaming client (gen_client.h): the HTTP/1.1
// response head, chunked transfer decoding, Server-Sent Events, and the reading of one OpenAI
// streaming chunk (`data: {...}`) into what the metrics need.
//
//   SseParser sse;
//   std::vector<SseEvent> events;
//   sse.Feed("data: {\"choices\":[{\"text\":\"Hi\"}]}\r\n\r\ndata: [DO", events);  // one event
//   sse.Feed("NE]\n\n", events);                                                 // [DONE]
//   StreamChunk c = ReadStreamChunk(events[0]);  // c.kind == kContent, c.text_bytes == 2
//
// NOTE (SSE): the parts of the WHATWG event-stream format that OpenAI-compatible servers use:
// lines end in CRLF, LF or CR (a CR at the end of one read and an LF at the start of the next are
// one line end); `data:` lines of one event are joined with '\n'; one space after the colon is
// dropped; `event:` names the event type; lines starting with ':' are comments; a blank line
// dispatches the event (an event with no data is dropped, as the spec says); `id:` and `retry:`
// are ignored. An event cut off by the end of the stream is never dispatched.
//
// Thread safety: none; one parser per connection.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::bench {

// What the client needs from a response head.
struct ResponseHead {
  int status = 0;
  bool chunked = false;         // Transfer-Encoding: chunked
  int64_t content_length = -1;  // -1: none (chunked, or the body ends when the server closes)
  bool close = false;           // Connection: close
  std::string content_type;     // lower-cased, parameters kept
};

// Parses "HTTP/1.x NNN reason\r\nName: value\r\n...\r\n\r\n" (the blank line may be left off).
// Header names are matched case-insensitively. False when the status line is malformed.
bool ParseResponseHead(std::string_view head, ResponseHead& out);

// Decodes a chunked transfer-encoded body fed in arbitrary pieces (RFC 9112 §7.1): chunk
// extensions and trailers are skipped.
class ChunkedDecoder {
 public:
  // Appends the payload carried by `in` to `out` and returns the number of bytes of `in` used:
  // all of them, unless the body ends inside `in` (the rest belongs to the next response).
  // Returns -1 on malformed framing (bad size line, missing CRLF after a chunk).
  int64_t Feed(std::string_view in, std::string& out);
  // True once the zero-size chunk and the trailer section have been read.
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kSize, kData, kDataEnd, kTrailer, kDone };
  State state_ = State::kSize;
  std::string line_;  // the size or trailer line read so far
  uint64_t left_ = 0;
};

struct SseEvent {
  std::string type;  // the `event:` field; empty for the default "message"
  std::string data;  // the `data:` lines joined with '\n'
};

class SseParser {
 public:
  // Parses `bytes` (any split of the stream) and appends each completed event to `out`.
  void Feed(std::string_view bytes, std::vector<SseEvent>& out);

 private:
  void Line(std::string_view line, std::vector<SseEvent>& out);

  std::string line_;      // the current line so far
  bool skip_lf_ = false;  // the last byte was a CR: an LF next is the same line end
  SseEvent event_;
  bool has_data_ = false;
};

// What one SSE event of an OpenAI streaming response means to the metrics.
struct StreamChunk {
  enum class Kind {
    kDone,     // data: [DONE]
    kContent,  // a chunk whose first choice carries text (completions `text`, chat
               // `delta.content` or `delta.reasoning_content`)
    kError,    // `event: error`, or an object with an "error" member
    kOther,    // anything else (role-only deltas, empty text, usage-only chunks)
    kInvalid,  // data that is not JSON
  };
  Kind kind = Kind::kOther;
  int64_t text_bytes = 0;          // kContent: bytes of text
  int64_t prompt_tokens = -1;      // from a "usage" object, when the chunk has one
  int64_t completion_tokens = -1;  // from a "usage" object, when the chunk has one
  std::string error;               // kError: the server's message; kInvalid: what was wrong
};

// Reads one event. The usage fields are filled whatever the kind (a server may put usage on a
// content chunk, vLLM's continuous usage stats do).
StreamChunk ReadStreamChunk(const SseEvent& event);

}  // namespace kiln::bench
