// SPDX-License-Identifier: Apache-2.0
// kiln bench generate end to end against a fake OpenAI streaming server started in the test: a
// loopback HTTP/1.1 server, a thread per connection, that streams max_tokens content chunks with
// a delay between them (chunked transfer encoding), then the usage chunk and [DONE]. The model
// name picks a misbehaviour: "bad" answers 404, "error-mid" sends an error event after two
// chunks, "drop" closes the connection after one chunk, "hang" never streams.
#include "bench/gen_runner.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "base/check.h"
#include "bench/gen_client.h"
#include "bench/gen_dataset.h"

namespace kiln::bench {
namespace {

class FakeOpenAiServer {
 public:
  struct Options {
    int chunk_delay_ms = 5;
    // Close a connection, unanswered, when its second request arrives: what a client sees when a
    // server closes an idle keep-alive connection just as the client reuses it.
    bool drop_reused = false;
  };

  explicit FakeOpenAiServer(Options options) : options_(options) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    KILN_CHECK(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                   ::listen(listen_fd_, 256) == 0,
               "fake server cannot listen");
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    accept_thread_ = std::thread([this] { Accept(); });
  }

  ~FakeOpenAiServer() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    accept_thread_.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

  int port() const { return port_; }
  int requests() const { return requests_.load(); }
  int connections() const { return connections_.load(); }
  int max_in_flight() const { return max_in_flight_.load(); }
  std::string last_body() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_body_;
  }

 private:
  void Accept() {
    while (!stop_) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (stop_) return;
        continue;
      }
      ++connections_;
      std::lock_guard<std::mutex> lock(mu_);
      fds_.push_back(fd);
      threads_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  static bool SendAll(int fd, std::string_view s) {
    while (!s.empty()) {
      ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // One chunk of the chunked body.
  static bool Chunk(int fd, std::string_view s) {
    std::ostringstream size;
    size << std::hex << s.size();
    return SendAll(fd, size.str() + "\r\n" + std::string(s) + "\r\n");
  }
  // One SSE event, split over two chunks so that the client sees it cut in the middle.
  static bool Event(int fd, const std::string& json) {
    std::string e = "data: " + json + "\n\n";
    return Chunk(fd, std::string_view(e).substr(0, e.size() / 2)) &&
           Chunk(fd, std::string_view(e).substr(e.size() / 2));
  }

  void Serve(int fd) {
    std::string in;
    char buf[65536];
    int heads = 0;
    while (true) {
      size_t head_end;
      while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) return Close(fd);
        in.append(buf, static_cast<size_t>(n));
      }
      std::string head = in.substr(0, head_end);
      for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t cl = head.find("content-length:");
      size_t body_len = cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 15));
      while (in.size() < head_end + 4 + body_len) {
        ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) return Close(fd);
        in.append(buf, static_cast<size_t>(n));
      }
      std::string body = in.substr(head_end + 4, body_len);
      ++heads;
      if (options_.drop_reused && heads == 2) return Close(fd);
      bool chat = head.find("post /v1/chat/completions") == 0;
      in.erase(0, head_end + 4 + body_len);
      ++requests_;
      int now_in_flight = ++in_flight_;
      int seen = max_in_flight_.load();
      while (now_in_flight > seen && !max_in_flight_.compare_exchange_weak(seen, now_in_flight)) {
      }
      bool keep = Respond(fd, body, chat);
      --in_flight_;
      if (!keep) return Close(fd);
    }
  }

  void Close(int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    fds_.erase(std::remove(fds_.begin(), fds_.end(), fd), fds_.end());
    ::close(fd);
  }

  // Returns false when the connection must close.
  bool Respond(int fd, const std::string& body, bool chat) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_body_ = body;
    }
    simdjson::dom::parser parser;
    simdjson::dom::element req;
    std::string_view model;
    int64_t max_tokens = 16;
    int64_t prompt_tokens = 0;
    if (parser.parse(body).get(req) != simdjson::SUCCESS ||
        req["model"].get(model) != simdjson::SUCCESS) {
      SendAll(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
      return false;
    }
    if (req["max_tokens"].get(max_tokens) != simdjson::SUCCESS) max_tokens = 16;
    simdjson::dom::array prompt;
    if (req["prompt"].get(prompt) == simdjson::SUCCESS) {
      prompt_tokens = static_cast<int64_t>(prompt.size());
    }
    if (model == "bad") {
      std::string err = R"({"error":{"message":"The model `bad` does not exist.","code":404}})";
      return SendAll(fd,
                     "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                     "Content-Length: " +
                         std::to_string(err.size()) + "\r\n\r\n" + err);
    }
    if (!SendAll(fd,
                 "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n")) {
      return false;
    }
    if (model == "hang") {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      return false;
    }
    if (chat &&
        !Event(fd, R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})")) {
      return false;
    }
    for (int64_t i = 0; i < max_tokens; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(options_.chunk_delay_ms));
      if (model == "error-mid" && i == 2) {
        Event(fd, R"({"error":{"object":"error","message":"engine died","code":500}})");
        Event(fd, "[DONE]");
        return Chunk(fd, "");
      }
      if (model == "drop" && i == 1) return false;
      std::string chunk = chat ? R"({"choices":[{"index":0,"delta":{"content":" tok"}}]})"
                               : R"({"choices":[{"index":0,"text":" tok"}]})";
      if (!Event(fd, chunk)) return false;
    }
    Event(
        fd,
        fmt::format(
            R"({{"choices":[],"usage":{{"prompt_tokens":{},"completion_tokens":{},"total_tokens":{}}}}})",
            prompt_tokens, max_tokens, prompt_tokens + max_tokens));
    Event(fd, "[DONE]");
    return Chunk(fd, "");  // the last chunk; a blank trailer section ends the body
  }

  Options options_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0}, connections_{0}, in_flight_{0}, max_in_flight_{0};
  std::thread accept_thread_;
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
  std::string last_body_;
};

Endpoint Resolve(int port) {
  auto ep = ResolveEndpoint("127.0.0.1:" + std::to_string(port));
  KILN_CHECK(ep.ok(), ep.status().ToString());
  return *ep;
}

std::vector<GenWork> RandomWork(const Endpoint& ep, const std::string& model, int n,
                                int64_t input_len, int64_t output_len) {
  DatasetOptions d;
  d.input_len = input_len;
  d.output_len = output_len;
  d.num_prompts = n;
  auto prompts = MakeDataset(d);
  KILN_CHECK(prompts.ok(), prompts.status().ToString());
  std::vector<GenWork> work;
  for (const GenPrompt& p : *prompts) {
    GenWork w;
    w.http_request =
        BuildGenHttpRequest(ep, kCompletionsPath, BuildGenRequestBody(p, model, false, 0), "");
    w.dataset_input_tokens = p.input_tokens;
    work.push_back(std::move(w));
  }
  return work;
}

TEST(GenRunnerTest, StreamsEveryRequestAndTimesEveryChunk) {
  FakeOpenAiServer server({/*chunk_delay_ms=*/5});
  Endpoint ep = Resolve(server.port());
  auto work = RandomWork(ep, "m", 8, 16, 6);
  int64_t start = NowNs();
  auto records = RunGenStreams(ep, work, GenStreamOptions{}, start);
  ASSERT_EQ(records.size(), 8u);
  for (const GenRecord& r : records) {
    ASSERT_TRUE(r.ok) << r.error_kind << ": " << r.error;
    EXPECT_EQ(r.chunk_ns.size(), 6u);
    EXPECT_EQ(r.completion_tokens, 6);
    EXPECT_EQ(r.prompt_tokens, 16);
    EXPECT_GE(r.send_ns, start);
    EXPECT_LT(r.chunk_ns.front(), r.done_ns);  // TTFT < E2E
    EXPECT_TRUE(std::is_sorted(r.chunk_ns.begin(), r.chunk_ns.end()));
    // The server sleeps 5 ms before each chunk.
    EXPECT_GE(r.chunk_ns.front() - r.send_ns, 4'000'000);
    EXPECT_GE(r.done_ns - r.send_ns, 6 * 4'000'000);
  }
  GenMetrics m = ComputeGenMetrics(records, 1.0, GoodputSlo{});
  EXPECT_EQ(m.completed, 8u);
  EXPECT_EQ(m.failed, 0u);
  EXPECT_EQ(m.total_output_tokens, 48);
  EXPECT_EQ(m.total_input_tokens, 128);
  EXPECT_EQ(m.itl.count, 8u * 5);
  EXPECT_GE(m.itl.median_ms, 4.0);
  EXPECT_GE(m.tpot.mean_ms, 4.0);
  EXPECT_LT(m.ttft.mean_ms, m.e2el.mean_ms);
  EXPECT_EQ(server.requests(), 8);

  // What was sent: the OpenAI fields of every request.
  simdjson::dom::parser parser;
  simdjson::dom::element body;
  ASSERT_EQ(parser.parse(server.last_body()).get(body), simdjson::SUCCESS);
  bool stream = false, ignore_eos = false, include_usage = false;
  int64_t max_tokens = 0;
  double temperature = -1;
  simdjson::dom::array prompt;
  EXPECT_EQ(body["stream"].get(stream), simdjson::SUCCESS);
  EXPECT_EQ(body["ignore_eos"].get(ignore_eos), simdjson::SUCCESS);
  EXPECT_EQ(body["stream_options"]["include_usage"].get(include_usage), simdjson::SUCCESS);
  EXPECT_EQ(body["max_tokens"].get(max_tokens), simdjson::SUCCESS);
  EXPECT_EQ(body["temperature"].get(temperature), simdjson::SUCCESS);
  EXPECT_EQ(body["prompt"].get(prompt), simdjson::SUCCESS);
  EXPECT_TRUE(stream && ignore_eos && include_usage);
  EXPECT_EQ(max_tokens, 6);
  EXPECT_EQ(temperature, 0.0);
  EXPECT_EQ(prompt.size(), 16u);
}

TEST(GenRunnerTest, MaxConcurrencyBoundsRequestsInFlightAndReusesConnections) {
  FakeOpenAiServer server({/*chunk_delay_ms=*/3});
  Endpoint ep = Resolve(server.port());
  auto work = RandomWork(ep, "m", 6, 4, 4);
  GenStreamOptions o;
  o.max_concurrency = 2;
  auto records = RunGenStreams(ep, work, o, NowNs());
  for (const GenRecord& r : records) ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(server.max_in_flight(), 2);
  EXPECT_EQ(server.connections(), 2);  // keep-alive: later requests reuse the two connections
  // All six were due at 0; the last ones waited for a slot.
  GenMetrics m = ComputeGenMetrics(records, 1.0, GoodputSlo{});
  EXPECT_GT(m.send_delay.max_ms, 10.0);  // at least one full request (4 x 3 ms) of waiting
}

// One at a time: request 0 on connection A; request 1 reuses A, which the server drops, so it is
// resent on a new connection B; request 2 reuses B, dropped again, resent on C.
TEST(GenRunnerTest, AReusedConnectionDroppedUnansweredIsReplacedOnce) {
  FakeOpenAiServer server({/*chunk_delay_ms=*/1, /*drop_reused=*/true});
  Endpoint ep = Resolve(server.port());
  auto work = RandomWork(ep, "m", 3, 4, 2);
  GenStreamOptions o;
  o.max_concurrency = 1;
  auto records = RunGenStreams(ep, work, o, NowNs());
  for (const GenRecord& r : records) EXPECT_TRUE(r.ok) << r.error_kind << ": " << r.error;
  EXPECT_EQ(server.requests(), 3);  // answered
  EXPECT_EQ(server.connections(), 3);
}

TEST(GenRunnerTest, FailuresAreCountedNotFatal) {
  FakeOpenAiServer server({/*chunk_delay_ms=*/2});
  Endpoint ep = Resolve(server.port());
  std::vector<GenWork> work;
  for (const char* model : {"m", "bad", "error-mid", "drop", "m", "hang"}) {
    auto one = RandomWork(ep, model, 1, 4, 5);
    work.push_back(std::move(one[0]));
  }
  GenStreamOptions o;
  o.request_timeout_ns = 200'000'000;
  auto records = RunGenStreams(ep, work, o, NowNs());
  ASSERT_EQ(records.size(), 6u);
  EXPECT_TRUE(records[0].ok);
  EXPECT_EQ(records[1].error_kind, "HTTP 404");
  EXPECT_EQ(records[1].error, "HTTP 404: The model `bad` does not exist.");
  EXPECT_EQ(records[2].error_kind, "error event");
  EXPECT_EQ(records[2].error, "engine died");
  EXPECT_EQ(records[2].chunk_ns.size(), 2u);
  EXPECT_EQ(records[3].error_kind, "connection error");
  EXPECT_TRUE(records[4].ok);
  EXPECT_EQ(records[5].error_kind, "timeout");
  GenMetrics m = ComputeGenMetrics(records, 1.0, GoodputSlo{});
  EXPECT_EQ(m.completed, 2u);
  EXPECT_EQ(m.failed, 4u);
  EXPECT_EQ(m.total_output_tokens, 10);
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("kiln_gen_run_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string ReadAll(std::FILE* f) {
  std::rewind(f);
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
  return s;
}

TEST(GenRunnerTest, RunGenBenchWritesTableJsonAndHtml) {
  FakeOpenAiServer server({/*chunk_delay_ms=*/1});
  GenOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(server.port());
  o.model = "m";
  o.endpoint = "/v1/chat/completions";
  o.input_len = 10;
  o.output_len = 4;
  o.num_prompts = 5;
  o.request_rate = 200;
  o.burstiness = 0.5;
  o.goodput = {"ttft:10000", "e2el:10000"};
  o.json_file = TempPath("out.json");
  o.html_file = TempPath("out.html");
  o.quiet = true;
  std::FILE* out = std::tmpfile();
  Status s = RunGenBench(o, out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string table = ReadAll(out);
  std::fclose(out);
  EXPECT_NE(table.find("Successful requests:"), std::string::npos) << table;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.load(o.json_file).get(root), simdjson::SUCCESS);
  int64_t completed = 0, output_tokens = 0;
  double goodput = 0;
  EXPECT_EQ(root["completed"].get(completed), simdjson::SUCCESS);
  EXPECT_EQ(root["total_output_tokens"].get(output_tokens), simdjson::SUCCESS);
  EXPECT_EQ(root["request_goodput"].get(goodput), simdjson::SUCCESS);
  EXPECT_EQ(completed, 5);
  EXPECT_EQ(output_tokens, 20);  // the chat role chunk carries no text: 4 content chunks each
  EXPECT_GT(goodput, 0);
  // Each request's due time is the arrival schedule's offset for it (a peer given the same
  // schedule can be checked against it).
  const std::vector<int64_t> due = ArrivalOffsetsNs(5, o.request_rate, o.burstiness, o.seed);
  simdjson::dom::array requests;
  ASSERT_EQ(root["requests"].get(requests), simdjson::SUCCESS);
  ASSERT_EQ(requests.size(), due.size());
  for (size_t i = 0; i < due.size(); ++i) {
    double due_ms = -1;
    EXPECT_EQ(requests.at(i)["due_ms"].get(due_ms), simdjson::SUCCESS);
    EXPECT_EQ(due_ms, static_cast<double>(due[i]) / 1e6) << "request " << i;
  }
  EXPECT_GT(due.back(), 0);
  std::ifstream html(o.html_file);
  std::stringstream page;
  page << html.rdbuf();
  EXPECT_NE(page.str().find("<svg"), std::string::npos);
  // The chat body carried the words as one user message.
  simdjson::dom::element body;
  ASSERT_EQ(parser.parse(server.last_body()).get(body), simdjson::SUCCESS);
  std::string_view role;
  EXPECT_EQ(body["messages"].at(0)["role"].get(role), simdjson::SUCCESS);
  EXPECT_EQ(role, "user");
  std::filesystem::remove(o.json_file);
  std::filesystem::remove(o.html_file);
}

TEST(GenRunnerTest, ErrorsNameTheProblem) {
  GenOptions o;
  o.model = "m";
  o.url = "http://127.0.0.1:1";  // nothing listens on port 1
  o.num_prompts = 1;
  o.quiet = true;
  Status s = RunGenBench(o, stdout);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot connect"), std::string::npos) << s.message();
  o.url = "https://127.0.0.1:8000";
  s = RunGenBench(o, stdout);
  EXPECT_NE(s.message().find("https"), std::string::npos) << s.message();
  o.url = "http://127.0.0.1:8000/v1";
  s = RunGenBench(o, stdout);
  EXPECT_NE(s.message().find("--endpoint"), std::string::npos) << s.message();
  o.endpoint = "/v1/embeddings";
  s = RunGenBench(o, stdout);
  EXPECT_NE(s.message().find("--endpoint"), std::string::npos) << s.message();
  o = GenOptions{};
  o.model = "m";
  o.goodput = {"ttfb:3"};
  s = RunGenBench(o, stdout);
  EXPECT_NE(s.message().find("ttfb:3"), std::string::npos) << s.message();

  // Every request failing is an error after the report.
  FakeOpenAiServer server({/*chunk_delay_ms=*/1});
  o = GenOptions{};
  o.url = "127.0.0.1:" + std::to_string(server.port());
  o.model = "bad";
  o.num_prompts = 2;
  o.input_len = 4;
  o.output_len = 2;
  o.quiet = true;
  std::FILE* out = std::tmpfile();
  s = RunGenBench(o, out);
  std::string table = ReadAll(out);
  std::fclose(out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("all 2 requests failed"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("does not exist"), std::string::npos) << s.message();
  EXPECT_NE(table.find("2 x HTTP 404"), std::string::npos) << table;
}

}  // namespace
}  // namespace kiln::bench
