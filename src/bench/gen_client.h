// SPDX-License-Identifier: Apache-2.0
#pragma once
// The streaming client of `kiln bench generate`: OpenAI-compatible request bodies, and one epoll
// event loop that sends every request at its intended time (at most --max-concurrency in flight)
// and reads the Server-Sent Events of each response, stamping every content chunk.
//
//   std::vector<GenWork> work = ...;  // BuildGenHttpRequest(...) + arrival offsets
//   std::vector<GenRecord> records = RunGenStreams(endpoint, work, GenStreamOptions{}, NowNs());
//   GenMetrics m = ComputeGenMetrics(records, seconds, slo);
//
// NOTE (timing): a request's latencies start when it is handed to a connection (`send_ns`), as
// `vllm bench serve` starts them when it posts; a request that waits for a --max-concurrency slot
// waits before that, and the wait is reported apart (send delay = send - intended). A reused
// keep-alive connection costs nothing; a new one counts its TCP connect. Every chunk parsed from
// one read gets that read's time.
//
// NOTE (connections): HTTP/1.1 keep-alive, one request per connection at a time, a connection
// per request in flight. A response may be chunked, sized by Content-Length or closed by the
// server. A request's outcome and E2E are fixed at `data: [DONE]` (or an error event); its slot
// (--max-concurrency, the connection) is freed when the body ends, or 1 s later if it does not.
// A reused connection that the server closed while idle (EOF or reset before any byte of the
// response) is replaced and the request resent once, not counted as a failure.
//
// NOTE (failures, counted, never fatal): a connection that cannot be opened ("connection error"),
// a non-200 answer ("HTTP 404", with the server's message), an error event in the stream ("error
// event"), a malformed response or event ("bad response"), a connection lost before the stream
// ended ("connection error"), no content before the end ("no content"), and --request-timeout
// ("timeout").
//
// Thread safety: RunGenStreams runs on the calling thread; it shares nothing.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "bench/gen_dataset.h"
#include "bench/gen_stats.h"
#include "bench/net.h"

namespace kiln::bench {

inline constexpr const char* kCompletionsPath = "/v1/completions";
inline constexpr const char* kChatCompletionsPath = "/v1/chat/completions";

// The JSON body of one streaming request: model, the prompt (token ids or text) or messages,
// max_tokens = prompt.output_tokens, temperature, "stream": true, "stream_options":
// {"include_usage": true} and "ignore_eos": true (vLLM's extension: generate max_tokens tokens).
std::string BuildGenRequestBody(const GenPrompt& prompt, const std::string& model, bool chat,
                                double temperature);

// The complete HTTP/1.1 POST of `body` to `path` (keep-alive; Authorization: Bearer `api_key`
// when it is not empty).
std::string BuildGenHttpRequest(const Endpoint& endpoint, const std::string& path,
                                const std::string& body, const std::string& api_key);

// One request to send.
struct GenWork {
  std::string http_request;          // BuildGenHttpRequest
  int64_t offset_ns = 0;             // intended send time from the start of the run
  int64_t dataset_input_tokens = 0;  // copied to the record
};

struct GenStreamOptions {
  int max_concurrency = 0;                         // requests in flight at most; 0 = unlimited
  int64_t request_timeout_ns = 21600'000'000'000;  // from the send; vLLM's 6 hours
};

struct GenProgress {
  size_t total = 0;
  size_t finished = 0;  // completed or failed
  size_t failed = 0;
  size_t in_flight = 0;
};

// Sends work[i] at start_ns + work[i].offset_ns (or when a slot frees up) and returns one record
// per request, in the order of `work`, when every request has finished or failed. `progress`,
// when set, is called about once a second from the calling thread.
std::vector<GenRecord> RunGenStreams(const Endpoint& endpoint, std::span<const GenWork> work,
                                     const GenStreamOptions& options, int64_t start_ns,
                                     const std::function<void(const GenProgress&)>& progress = {});

}  // namespace kiln::bench
