// SPDX-License-Identifier: Apache-2.0
// HttpServer implementation: an Asio acceptor, one Session per connection (on its own strand),
// and the endpoint handlers.
//
// NOTE on lifetimes and shutdown. Everything async holds a shared_ptr<Session>; the io_context
// keeps running while it has work. An inference in flight holds an HttpInferSink (the
// ResponseSink of server/inference.h, which guarantees it exactly one Finish) that carries the
// Session and a work guard on the io_context, so the io threads cannot run out of work (and
// Stop cannot return) before the model answers. The sink posts the answer to the session's
// strand and drops both at once.
//
// NOTE on cancellation. While its answer is pending, a session watches its socket for reading
// (an async_wait, no data consumed). Readable then means the client closed the connection (a
// zero-byte peek, or an error), or it sent its next request already (pipelining: the bytes stay
// for the next read and the watch ends). A close sets the request's Cancellation, so a queued
// request is dropped from its model's queue, and closes the session; the answer, when it comes,
// finds the session closed and is discarded. Stop() sets
// `stopping_`, closes the acceptor, tells every session (idle readers close at once; busy ones
// close after their response is written), releases the main work guard and joins the threads:
// they return exactly when the last connection is gone. A session checks `stopping_` before
// every new read, so one accepted or finishing concurrently with Stop cannot slip through.
//
// NOTE on lifecycle requests (repository load / unload): they block for as long as a model
// takes to load or drain, so they run on a one-thread control pool, never on an io thread. The
// task holds the Session and a work guard like an HttpInferSink and posts its answer back to the
// session's strand. Stop joins the pool after the io threads: a load in progress is finished.
//
// NOTE on draining (StartDraining): readiness turns false and new inference and load requests
// are refused with 503; health, metadata, statistics and the index keep answering, and requests
// already accepted are answered normally. `infer_in_flight_` counts inference requests handed
// to a model and not answered yet (what a shutdown that runs out of time abandons).
//
// NOTE on refusing a request early (413, malformed HTTP): the answer is written, the send side
// is shut down, and the rest of what the client sends is read into a small scratch buffer and
// discarded for at most kLingerTimeout before closing. Closing with unread data would make the
// kernel send a reset, and a client still writing its body would never see the answer.
//
// NOTE on TLS. A connection's bytes go through an HttpStream: plain TCP, or TLS over it. The
// choice is made once per connection, so the plain path costs one branch per I/O operation and
// Session stays one class. Timeouts live on the TCP layer below TLS, so they bound the
// handshake and every TLS read and write alike. Closing skips TLS's close_notify: every answer
// is framed (Content-Length or the last chunk), so the client never depends on it.
//
// NOTE on tenants. Handle() authorizes every routed request for its API group before anything
// else, and admits inference requests by the tenant's limits; the admission's lease moves into
// the request's sink (released when the model answers) or is dropped with the first answer the
// session sends itself (an error found before the model was asked).
//
// No exceptions escape: every Asio/Beast call that can fail takes an error_code, and the io
// loop catches anything a handler throws (allocation failure), logs it and keeps running.
#include "server/http/http_server.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/logging.h"
#include "repo/model_config.pb.h"
#include "repo/model_manager.h"
#include "server/http/compression.h"
#include "server/http/config_json.h"
#include "server/http/gen_http.h"
#include "server/http/generate_json.h"
#include "server/http/infer_json.h"
#include "server/http/logging_json.h"
#include "server/http/metadata_json.h"
#include "server/http/openai_json.h"
#include "server/http/repository_json.h"
#include "server/http/router.h"
#include "server/http/stats_json.h"
#include "server/http/trace_json.h"
#include "server/inference.h"
#include "server/json_writer.h"
#include "server/listener.h"
#include "server/security/access.h"
#include "server/security/api_groups.h"
#include "server/server_metadata.h"
#include "server/status_map.h"

namespace kiln {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr auto kReadTimeout = std::chrono::seconds(300);
constexpr auto kWriteTimeout = std::chrono::seconds(60);
constexpr auto kLingerTimeout = std::chrono::seconds(5);
constexpr auto kHandshakeTimeout = std::chrono::seconds(10);
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);
constexpr uint32_t kHeaderLimitBytes = 16 * 1024;
constexpr size_t kLingerBufferBytes = 16 * 1024;

// Answers that belong to HTTP itself rather than to a kiln StatusCode (so they are not in the
// status_map table).
constexpr unsigned kHttpOk = 200;
constexpr unsigned kHttpBadRequest = 400;
constexpr unsigned kHttpMethodNotAllowed = 405;
constexpr unsigned kHttpPayloadTooLarge = 413;

std::string_view ToStd(beast::string_view s) { return {s.data(), s.size()}; }

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool IsHttpParseError(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category();
}

using Response = http::response<http::string_body>;
using WorkGuard = net::executor_work_guard<net::io_context::executor_type>;

// A connection's byte stream: plain TCP, or TLS over TCP (NOTE on TLS). Meets Asio's
// AsyncReadStream / AsyncWriteStream for callback handlers.
class HttpStream {
 public:
  using executor_type = beast::tcp_stream::executor_type;

  // `tls` null: plain. REQUIRES: *tls outlives the stream.
  HttpStream(tcp::socket&& socket, net::ssl::context* tls) {
    if (tls != nullptr) {
      tls_.emplace(std::move(socket), *tls);
    } else {
      plain_.emplace(std::move(socket));
    }
  }

  bool tls() const { return tls_.has_value(); }
  beast::tcp_stream& tcp_layer() { return tls_ ? tls_->next_layer() : *plain_; }
  tcp::socket& socket() { return tcp_layer().socket(); }
  executor_type get_executor() { return tcp_layer().get_executor(); }
  template <class Duration>
  void expires_after(Duration d) {
    tcp_layer().expires_after(d);
  }
  void expires_never() { tcp_layer().expires_never(); }

  // REQUIRES: tls().
  template <class Handler>
  void async_handshake(Handler&& handler) {
    tls_->async_handshake(net::ssl::stream_base::server, std::forward<Handler>(handler));
  }

  template <class Buffers, class Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->async_read_some(buffers, std::forward<Handler>(handler));
    } else {
      plain_->async_read_some(buffers, std::forward<Handler>(handler));
    }
  }
  template <class Buffers, class Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->async_write_some(buffers, std::forward<Handler>(handler));
    } else {
      plain_->async_write_some(buffers, std::forward<Handler>(handler));
    }
  }

 private:
  std::optional<beast::tcp_stream> plain_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_;
};

// The TLS context of the listener; INVALID_ARGUMENT naming what OpenSSL refused.
Result<std::unique_ptr<net::ssl::context>> MakeTlsContext(const TlsMaterial& tls) {
  auto ctx = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
  beast::error_code ec;
  ctx->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                       net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                       net::ssl::context::no_tlsv1_1 | net::ssl::context::single_dh_use,
                   ec);
  if (!ec) ctx->use_certificate_chain(net::buffer(tls.cert_pem), ec);
  if (ec) return Status::InvalidArgument("HTTPS server certificate: " + ec.message());
  ctx->use_private_key(net::buffer(tls.key_pem), net::ssl::context::pem, ec);
  if (ec) return Status::InvalidArgument("HTTPS server key: " + ec.message());
  if (!tls.root_pem.empty()) {
    ctx->add_certificate_authority(net::buffer(tls.root_pem), ec);
    if (ec) return Status::InvalidArgument("HTTPS root certificates: " + ec.message());
  }
  if (tls.mutual) {
    ctx->set_verify_mode(net::ssl::verify_peer | net::ssl::verify_fail_if_no_peer_cert, ec);
    if (ec) return Status::InvalidArgument("HTTPS client verification: " + ec.message());
  }
  return ctx;
}

class Session;

}  // namespace

class HttpServer::Impl {
 public:
  Impl(const HttpServerOptions& options, ModelManager* manager)
      : options_(options),
        manager_(manager),
        acceptor_(net::make_strand(ioc_)),
        accept_retry_timer_(acceptor_.get_executor()) {}

  ~Impl() { Stop(); }

  Status Start();
  void Stop();
  int port() const { return port_.load(); }
  void SetReady(bool ready) { ready_.store(ready); }
  void StartDraining() {
    draining_.store(true);
    ready_.store(false);
  }
  size_t InferencesInFlight() const { return infer_in_flight_.load(); }

  // For sessions.
  const HttpServerOptions& options() const { return options_; }
  ModelManager* manager() const { return manager_; }
  bool ready() const { return ready_.load() && !draining_.load(); }
  bool stopping() const { return stopping_.load(); }
  bool draining() const { return draining_.load(); }
  // Unix time the server was created (OpenAI's model "created").
  int64_t started_unix() const { return started_unix_; }
  TenantGate* gate() const { return options_.gate.get(); }
  WorkGuard MakeWorkGuard() { return net::make_work_guard(ioc_); }
  net::thread_pool& control_pool() { return control_pool_; }
  void InferStarted() { infer_in_flight_.fetch_add(1); }
  void InferFinished() { infer_in_flight_.fetch_sub(1); }
  void Register(const std::shared_ptr<Session>& session);
  void Unregister(Session* session);

 private:
  void StopLocked();  // REQUIRES: lifecycle_mu_ held
  void DoAccept();
  void OnAccept(beast::error_code ec, tcp::socket socket);
  void RunIoLoop();
  const HttpServerOptions options_;
  ModelManager* const manager_;
  std::atomic<bool> ready_{true};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{false};
  std::atomic<size_t> infer_in_flight_{0};
  std::atomic<int> port_{0};
  const int64_t started_unix_ = std::chrono::duration_cast<std::chrono::seconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();

  std::mutex lifecycle_mu_;  // serializes Start and Stop
  enum class State { kCreated, kRunning, kStopped };
  State state_ = State::kCreated;  // guarded by lifecycle_mu_

  // Declared before ioc_ so they outlive it: a session destroyed while the io_context is torn
  // down still unregisters.
  std::mutex sessions_mu_;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions_;  // guarded by sessions_mu_

  std::unique_ptr<net::ssl::context> tls_;  // set by Start with options_.tls; read-only after

  net::io_context ioc_;
  std::optional<WorkGuard> work_;
  tcp::acceptor acceptor_;                // used only on its strand (after Start)
  net::steady_timer accept_retry_timer_;  // same strand
  std::vector<std::thread> threads_;
  // Runs repository load / unload (see the NOTE). Declared after ioc_ so it is destroyed first:
  // its tasks hold work guards on ioc_.
  net::thread_pool control_pool_{1};
};

namespace {

// One HTTP connection. All members are used only on the connection's strand (the executor of
// stream_), except the constant ones.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, net::ssl::context* tls, HttpServer::Impl* server)
      : stream_(std::move(socket), tls), server_(server) {}
  ~Session() { server_->Unregister(this); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  net::any_io_executor executor() { return stream_.get_executor(); }

  void Start() {
    server_->Register(shared_from_this());
    net::dispatch(executor(), beast::bind_front_handler(
                                  stream_.tls() ? &Session::DoHandshake : &Session::DoReadHeader,
                                  shared_from_this()));
  }

  // On the strand: the server is stopping.
  void OnServerStop() {
    if (state_ == State::kReading || state_ == State::kLingering) Close();
  }

  // On the strand: the model answered the request in flight.
  void OnInferDone(Result<InferResponse> result);
  // On the strand: a repository load / unload finished.
  void OnControlDone(const Status& status);
  // On the strand: the generation in flight sent a chunk / finished.
  void OnGenChunk(GenChunk chunk);
  void OnGenDone(Result<GenFinal> result);

 private:
  enum class State { kReading, kBusy, kLingering, kClosed };
  enum class After { kContinue, kClose, kLinger };

  void DoHandshake();
  void OnHandshake(beast::error_code ec);
  void DoReadHeader();
  void OnReadHeader(beast::error_code ec, size_t bytes);
  void DoReadBody();
  void OnWriteContinue(beast::error_code ec, size_t bytes);
  void OnReadBody(beast::error_code ec, size_t bytes);
  void OnReadError(const beast::error_code& ec);
  void Handle();
  // Authorizes the request for its API group and admits an inference request (NOTE on
  // tenants); false when it answered the request with a refusal.
  bool Authorize(const Route& route);
  // A refusal of the tenant gate: 401 with WWW-Authenticate, 403, or 429 with `retry_after_s`.
  void SendRefusal(const Status& status, int64_t retry_after_s, bool openai);
  void HandleModelMetadata(const Route& route);
  void HandleModelReady(const Route& route);
  void HandleInfer(const Route& route);
  void HandleStats(const Route& route);
  void HandleModelConfig(const Route& route);
  void HandleRepositoryIndex(const Route& route);
  void HandleLoggingUpdate();
  void HandleTraceUpdate();
  void HandleRepositoryControl(const Route& route);
  void HandleOpenAiModels(const Route& route);
  void HandleOpenAi(const Route& route);
  void HandleGenerate(const Route& route);
  // Starts a generation whose answer `format` writes (gen_http.h).
  void StartGeneration(const std::shared_ptr<LoadedModel>& model,
                       std::unique_ptr<GenerateRequest> request,
                       std::unique_ptr<GenHttpFormat> format);
  // Writes what is pending of the generation's stream (headers, chunks, the end).
  void PumpGeneration();
  void OnGenWritten(size_t chunks, bool last, beast::error_code ec, size_t bytes);
  // An error answer with a body in the API's own shape (OpenAI's, or kiln's {"error"}).
  void SendErrorBody(const Status& status, std::string body);

  void SendEmpty(unsigned status);
  void SendJson(unsigned status, std::string body);
  void SendError(const Status& status, After after = After::kContinue);
  void SendHttpError(unsigned status, std::string_view message, After after);
  void Send(Response response, After after);
  void OnWrite(After after, beast::error_code ec, size_t bytes);
  void Linger();
  void OnLingerRead(beast::error_code ec, size_t bytes);
  void CloseGracefully();
  void Close();

  HttpStream stream_;
  beast::flat_buffer buffer_;
  HttpServer::Impl* const server_;
  State state_ = State::kReading;

  std::optional<http::request_parser<http::empty_body>> header_parser_;
  std::optional<http::request_parser<http::string_body>> body_parser_;
  // The Content-Length of the request being read; unset for a chunked body. A body of known
  // length is read straight into the request's body string (one read of the socket into its
  // final place, instead of the parser's small reads and copies through buffer_).
  std::optional<uint64_t> content_length_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool head_request_ = false;
  std::optional<http::response<http::empty_body>> continue_response_;
  std::optional<Response> response_;
  std::unique_ptr<char[]> linger_buffer_;

  // Watches the socket while an answer is pending (NOTE on cancellation).
  void WatchForDisconnect();
  void OnReadableWhilePending(beast::error_code ec);

  // The inference in flight: how the response is encoded, and its cancellation.
  ResponseEncoding infer_encoding_;
  ContentCoding infer_response_coding_ = ContentCoding::kIdentity;
  std::shared_ptr<Cancellation> infer_cancel_;  // null: no inference pending
  std::string traceparent_;  // the current request's W3C traceparent header (server/trace.h)
  int tenant_ = TenantGate::kAnonymous;  // the current request's tenant
  std::shared_ptr<TenantLease> lease_;   // its admission, until a sink takes it or it is answered

  // The generation in flight (NOTE on generation streams).
  std::unique_ptr<GenHttpFormat> gen_format_;  // null: none
  std::shared_ptr<std::atomic<size_t>> gen_backlog_;
  bool gen_started_ = false;  // the response header was written (or is being written)
  bool gen_writing_ = false;  // a write is in progress
  bool gen_done_ = false;     // the model finished; gen_tail_ holds the last bytes
  bool gen_chunked_ = true;   // HTTP/1.1 chunked body; HTTP/1.0: raw body, then close
  std::string gen_pending_;   // bytes to write next
  size_t gen_pending_chunks_ = 0;
  std::string gen_out_;   // bytes being written
  std::string gen_tail_;  // bytes after the last chunk
  std::optional<http::response<http::empty_body>> gen_header_;
  std::optional<http::response_serializer<http::empty_body>> gen_serializer_;
};

// Carries a Session and a work guard from the model to the session's strand; see the NOTE
// above. Finish is called exactly once (server/inference.h guarantees it).
class HttpInferSink final : public ResponseSink {
 public:
  HttpInferSink(std::shared_ptr<Session> session, WorkGuard work, HttpServer::Impl* server,
                std::shared_ptr<TenantLease> lease)
      : session_(std::move(session)),
        work_(std::move(work)),
        server_(server),
        lease_(std::move(lease)) {
    server_->InferStarted();
  }
  HttpInferSink(const HttpInferSink&) = delete;
  HttpInferSink& operator=(const HttpInferSink&) = delete;

  // The v2 infer endpoint answers once: a partial response has no HTTP encoding here.
  void Send(InferResponse partial) override { Charge(partial); }

  void Finish(Result<InferResponse> result) override {
    if (result.ok()) Charge(*result);
    std::shared_ptr<Session> session = std::move(session_);
    std::optional<WorkGuard> work = std::move(work_);
    work_.reset();
    lease_.reset();
    server_->InferFinished();
    net::any_io_executor ex = session->executor();
    net::post(ex, [session = std::move(session), result = std::move(result)]() mutable {
      session->OnInferDone(std::move(result));
    });
    // `work` is released here; the posted handler keeps the io_context busy from now on.
  }

 private:
  // A generative model's tokens (the tensor path, server/gen_infer.h) go to the tenant's bucket.
  void Charge(const InferResponse& response) {
    if (lease_ != nullptr && response.generated_tokens > 0) {
      lease_->ChargeTokens(response.generated_tokens);
    }
  }

  std::shared_ptr<Session> session_;
  std::optional<WorkGuard> work_;
  HttpServer::Impl* const server_;
  std::shared_ptr<TenantLease> lease_;  // null without a tenant
};

// The GenerationSink of a generation request: carries the Session and a work guard like
// HttpInferSink and posts every chunk and the final result to the session's strand. backlog()
// counts the chunks posted and not yet written to the socket (the session decrements it), so a
// client that reads too slowly makes the model cut its stream.
class HttpGenSink final : public GenerationSink {
 public:
  HttpGenSink(std::shared_ptr<Session> session, WorkGuard work, HttpServer::Impl* server,
              std::shared_ptr<std::atomic<size_t>> backlog, std::shared_ptr<TenantLease> lease)
      : session_(std::move(session)),
        work_(std::move(work)),
        server_(server),
        backlog_(std::move(backlog)),
        lease_(std::move(lease)) {
    server_->InferStarted();
  }
  HttpGenSink(const HttpGenSink&) = delete;
  HttpGenSink& operator=(const HttpGenSink&) = delete;

  void Send(GenChunk chunk) override {
    if (lease_ != nullptr) {
      // The tenant's tokens are charged as they are produced (access.h).
      const auto n = static_cast<int64_t>(chunk.token_ids.size());
      lease_->ChargeTokens(n);
      charged_tokens_ += n;
    }
    backlog_->fetch_add(1);
    net::post(session_->executor(), [session = session_, chunk = std::move(chunk)]() mutable {
      session->OnGenChunk(std::move(chunk));
    });
  }
  void Finish(Result<GenFinal> result) override {
    std::shared_ptr<Session> session = std::move(session_);
    std::optional<WorkGuard> work = std::move(work_);
    work_.reset();
    if (lease_ != nullptr && result.ok()) {
      // Tokens the chunks did not carry (a non-streaming model's answer) count at the end.
      lease_->ChargeTokens(result->usage.completion_tokens - charged_tokens_);
    }
    lease_.reset();
    server_->InferFinished();
    net::any_io_executor ex = session->executor();
    net::post(ex, [session = std::move(session), result = std::move(result)]() mutable {
      session->OnGenDone(std::move(result));
    });
  }
  size_t backlog() const override { return backlog_->load(); }

 private:
  std::shared_ptr<Session> session_;
  std::optional<WorkGuard> work_;
  HttpServer::Impl* const server_;
  std::shared_ptr<std::atomic<size_t>> backlog_;
  std::shared_ptr<TenantLease> lease_;  // null without a tenant
  int64_t charged_tokens_ = 0;          // generated tokens charged to lease_ so far
};

void Session::DoHandshake() {
  if (server_->stopping()) {
    Close();
    return;
  }
  stream_.expires_after(kHandshakeTimeout);
  stream_.async_handshake(beast::bind_front_handler(&Session::OnHandshake, shared_from_this()));
}

void Session::OnHandshake(beast::error_code ec) {
  if (ec) {
    beast::error_code ignored;
    const tcp::endpoint peer = stream_.socket().remote_endpoint(ignored);
    KILN_LOG_DEBUG("HTTPS handshake with {}:{} failed: {}", peer.address().to_string(), peer.port(),
                   ec.message());
    Close();
    return;
  }
  DoReadHeader();
}

void Session::DoReadHeader() {
  if (state_ == State::kClosed) return;
  if (server_->stopping()) {
    Close();
    return;
  }
  state_ = State::kReading;
  body_parser_.reset();
  response_.reset();
  header_parser_.emplace();
  header_parser_->header_limit(kHeaderLimitBytes);
  // The header parser would refuse a large Content-Length by its default 8 MiB limit; the
  // limit is checked in OnReadHeader instead (to name the size) and set on the body parser.
  header_parser_->body_limit(std::numeric_limits<uint64_t>::max());
  stream_.expires_after(kReadTimeout);
  http::async_read_header(stream_, buffer_, *header_parser_,
                          beast::bind_front_handler(&Session::OnReadHeader, shared_from_this()));
}

void Session::OnReadHeader(beast::error_code ec, size_t /*bytes*/) {
  if (ec) {
    OnReadError(ec);
    return;
  }
  const auto& req = header_parser_->get();
  version_ = req.version();
  keep_alive_ = req.keep_alive();
  head_request_ = req.method() == http::verb::head;
  const uint64_t limit = server_->options().max_request_bytes;
  const boost::optional<uint64_t> length = header_parser_->content_length();
  content_length_.reset();
  if (length) content_length_ = *length;
  if (length && *length > limit) {
    state_ = State::kBusy;
    SendHttpError(
        kHttpPayloadTooLarge,
        fmt::format("request body of {} bytes exceeds the limit of {} bytes", *length, limit),
        After::kLinger);
    return;
  }
  body_parser_.emplace(std::move(*header_parser_));
  header_parser_.reset();
  body_parser_->body_limit(limit);
  if (length) body_parser_->get().body().reserve(*length + kJsonPaddingBytes);
  if (body_parser_->is_done()) {
    Handle();
    return;
  }
  if (version_ >= 11 && IEquals(ToStd(body_parser_->get()[http::field::expect]), "100-continue")) {
    continue_response_.emplace(http::status::continue_, version_);
    stream_.expires_after(kWriteTimeout);
    http::async_write(stream_, *continue_response_,
                      beast::bind_front_handler(&Session::OnWriteContinue, shared_from_this()));
    return;
  }
  DoReadBody();
}

void Session::OnWriteContinue(beast::error_code ec, size_t /*bytes*/) {
  continue_response_.reset();
  if (ec) {
    Close();
    return;
  }
  DoReadBody();
}

void Session::DoReadBody() {
  if (server_->stopping()) {
    Close();
    return;
  }
  stream_.expires_after(kReadTimeout);
  if (!content_length_) {  // chunked: the parser decodes it
    http::async_read(stream_, buffer_, *body_parser_,
                     beast::bind_front_handler(&Session::OnReadBody, shared_from_this()));
    return;
  }
  // What the header read already buffered is the body's start (bytes beyond the body are the
  // next pipelined request and stay in buffer_); the rest is read into place in one operation.
  std::string& body = body_parser_->get().body();
  const auto length = static_cast<size_t>(*content_length_);
  body.resize(length);
  const size_t have = std::min(buffer_.size(), length);
  net::buffer_copy(net::buffer(body.data(), have), buffer_.data());
  buffer_.consume(have);
  net::async_read(stream_, net::buffer(body.data() + have, length - have),
                  beast::bind_front_handler(&Session::OnReadBody, shared_from_this()));
}

void Session::OnReadBody(beast::error_code ec, size_t /*bytes*/) {
  if (ec) {
    // A body of known length cut short is a client that went away mid-request.
    if (content_length_ && ec == net::error::eof) ec = http::error::partial_message;
    OnReadError(ec);
    return;
  }
  Handle();
}

void Session::OnReadError(const beast::error_code& ec) {
  if (state_ == State::kClosed) return;
  if (ec == http::error::body_limit) {
    state_ = State::kBusy;
    SendHttpError(kHttpPayloadTooLarge,
                  fmt::format("request body exceeds the limit of {} bytes",
                              server_->options().max_request_bytes),
                  After::kLinger);
    return;
  }
  if (ec == http::error::header_limit) {
    state_ = State::kBusy;
    keep_alive_ = false;
    SendHttpError(kHttpBadRequest,
                  fmt::format("request header exceeds the limit of {} bytes", kHeaderLimitBytes),
                  After::kLinger);
    return;
  }
  // end_of_stream before any byte of a request is the client closing an idle connection.
  if (IsHttpParseError(ec) && ec != http::error::end_of_stream &&
      ec != http::error::partial_message) {
    state_ = State::kBusy;
    keep_alive_ = false;
    SendHttpError(kHttpBadRequest, fmt::format("malformed HTTP request: {}", ec.message()),
                  After::kLinger);
    return;
  }
  Close();
}

void Session::Handle() {
  state_ = State::kBusy;
  const auto& req = body_parser_->get();
  const Route route = RouteRequest(ToStd(req.method_string()), ToStd(req.target()));
  traceparent_ = std::string(ToStd(req["traceparent"]));
  if (server_->gate() != nullptr && !Authorize(route)) return;
  switch (route.kind) {
    case RouteKind::kNotFound:
      if (ToStd(req.target()).starts_with("/v1/")) {
        const Status nf = Status::NotFound("Not Found");
        SendErrorBody(nf, OpenAiErrorJson(nf));
        return;
      }
      SendError(Status::NotFound("Not Found"));
      return;
    case RouteKind::kMethodNotAllowed: {
      Response res{static_cast<http::status>(kHttpMethodNotAllowed), version_};
      res.set(http::field::allow, route.allow);
      res.set(http::field::content_type, "application/json");
      res.body() = JsonErrorBody("Method Not Allowed");
      Send(std::move(res), After::kContinue);
      return;
    }
    case RouteKind::kBadRequest:
      SendError(Status::InvalidArgument(route.error));
      return;
    case RouteKind::kHealthLive:
      SendEmpty(kHttpOk);
      return;
    case RouteKind::kHealthReady:
      SendEmpty(server_->ready() && server_->manager()->AllModelsReady() ? kHttpOk
                                                                         : kHttpBadRequest);
      return;
    case RouteKind::kServerMetadata:
      SendJson(kHttpOk, ServerMetadataJson(kServerName, server_->options().server_version,
                                           std::span<const std::string_view>(kServerExtensions)));
      return;
    case RouteKind::kModelMetadata:
      HandleModelMetadata(route);
      return;
    case RouteKind::kModelReady:
      HandleModelReady(route);
      return;
    case RouteKind::kModelInfer:
      HandleInfer(route);
      return;
    case RouteKind::kModelStats:
      HandleStats(route);
      return;
    case RouteKind::kModelConfig:
      HandleModelConfig(route);
      return;
    case RouteKind::kRepositoryIndex:
      HandleRepositoryIndex(route);
      return;
    case RouteKind::kRepositoryLoad:
    case RouteKind::kRepositoryUnload:
      HandleRepositoryControl(route);
      return;
    case RouteKind::kLoggingGet:
      SendJson(kHttpOk, LogSettingsJson(GetLogSettings()));
      return;
    case RouteKind::kTraceGet:
      SendJson(kHttpOk, TraceSettingsJson(Tracer::Global().settings()));
      return;
    case RouteKind::kTraceUpdate:
      HandleTraceUpdate();
      return;
    case RouteKind::kLoggingUpdate:
      HandleLoggingUpdate();
      return;
    case RouteKind::kModelGenerate:
    case RouteKind::kModelGenerateStream:
      HandleGenerate(route);
      return;
    case RouteKind::kOpenAiModels:
    case RouteKind::kOpenAiModel:
      HandleOpenAiModels(route);
      return;
    case RouteKind::kOpenAiCompletions:
    case RouteKind::kOpenAiChatCompletions:
      HandleOpenAi(route);
      return;
  }
  SendError(Status::Internal("unhandled route"));
}

bool Session::Authorize(const Route& route) {
  tenant_ = TenantGate::kAnonymous;
  lease_.reset();
  const std::optional<ApiGroup> group = ApiGroupOfRoute(route.kind);
  if (!group) return true;  // not an endpoint: answered as it is
  TenantGate* gate = server_->gate();
  const bool openai = route.kind == RouteKind::kOpenAiModels ||
                      route.kind == RouteKind::kOpenAiModel ||
                      route.kind == RouteKind::kOpenAiCompletions ||
                      route.kind == RouteKind::kOpenAiChatCompletions;
  Result<int> tenant =
      gate->Authorize(*group, BearerKey(ToStd(body_parser_->get()[http::field::authorization])));
  if (!tenant.ok()) {
    SendRefusal(tenant.status(), 0, openai);
    return false;
  }
  tenant_ = *tenant;
  if (*group != ApiGroup::kInference) return true;
  // A v2 infer request to a generative model is a generation too (server/gen_infer.h).
  bool generation = route.kind != RouteKind::kModelInfer;
  if (!generation) {
    Result<std::shared_ptr<LoadedModel>> model =
        server_->manager()->GetModel(route.model, route.version);
    generation = model.ok() && (*model)->generative();
  }
  TenantGate::Admission admission = gate->Admit(tenant_, generation);
  if (!admission.status.ok()) {
    SendRefusal(admission.status, admission.retry_after_s, openai);
    return false;
  }
  lease_ = std::move(admission.lease);
  return true;
}

void Session::SendRefusal(const Status& status, int64_t retry_after_s, bool openai) {
  const ProtocolStatus& p = ProtocolStatusFor(status.code());
  Response res{static_cast<http::status>(p.http), version_};
  if (status.code() == StatusCode::kUnauthenticated) {
    res.set(http::field::www_authenticate, "Bearer realm=\"kiln\"");
  }
  if (retry_after_s > 0) res.set(http::field::retry_after, std::to_string(retry_after_s));
  res.set(http::field::content_type, "application/json");
  res.body() = openai ? OpenAiErrorJson(status) : JsonErrorBody(status.message());
  Send(std::move(res), After::kContinue);
}

void Session::HandleModelMetadata(const Route& route) {
  Result<std::shared_ptr<LoadedModel>> model =
      server_->manager()->GetModel(route.model, route.version);
  if (!model.ok()) {
    SendError(model.status());
    return;
  }
  std::vector<int64_t> versions;
  if (route.version >= 0) {
    versions.push_back((*model)->version());
  } else {
    versions = server_->manager()->ReadyVersions(route.model);
    if (versions.empty()) versions.push_back((*model)->version());
  }
  SendJson(kHttpOk, ModelMetadataJson(route.model, versions, (*model)->signature()));
}

void Session::HandleModelConfig(const Route& route) {
  Result<std::shared_ptr<LoadedModel>> model =
      server_->manager()->GetModel(route.model, route.version);
  if (!model.ok()) {
    SendError(model.status());
    return;
  }
  const inference::ModelConfig* config = (*model)->model_config();
  if (config == nullptr) {
    SendError(
        Status::Internal(fmt::format("model '{}' has no configuration to report", route.model)));
    return;
  }
  SendJson(kHttpOk, ModelConfigJson(*config));
}

void Session::HandleModelReady(const Route& route) {
  if (!server_->ready()) {
    SendError(Status::Unavailable("the server is not ready (shutting down)"));
    return;
  }
  Result<std::shared_ptr<LoadedModel>> model =
      server_->manager()->GetModel(route.model, route.version);
  if (!model.ok()) {
    SendError(model.status());
    return;
  }
  SendEmpty(kHttpOk);
}

void Session::HandleInfer(const Route& route) {
  if (server_->draining()) {
    SendError(Status::Unavailable("the server is shutting down: no new inference requests"));
    return;
  }
  auto& req = body_parser_->get();
  const std::string_view encoding = ToStd(req[http::field::content_encoding]);
  const std::optional<ContentCoding> coding = ParseContentEncoding(encoding);
  if (!coding) {
    Response res{static_cast<http::status>(HttpStatusFor(StatusCode::kUnimplemented)), version_};
    res.set(http::field::accept_encoding, "gzip, deflate");
    res.set(http::field::content_type, "application/json");
    res.body() = JsonErrorBody(fmt::format(
        "unsupported Content-Encoding '{}'; supported: gzip, deflate, identity", encoding));
    Send(std::move(res), After::kContinue);
    return;
  }
  const ContentCoding response_coding =
      ChooseResponseCoding(ToStd(req[http::field::accept_encoding]));
  Result<std::shared_ptr<LoadedModel>> model =
      FindModel(*server_->manager(), route.model, route.version, [&req](std::string_view name) {
        return ToStd(req[beast::string_view(name.data(), name.size())]);
      });
  if (!model.ok()) {
    SendError(model.status());
    return;
  }
  Result<ParsedInferRequest> parsed = ParseInferHttpBody(
      std::move(req.body()), encoding, ToStd(req["Inference-Header-Content-Length"]),
      server_->options().max_request_bytes, (*model)->signature());
  body_parser_.reset();  // the body now lives in the request's tensors, or is freed
  if (!parsed.ok()) {
    SendError(parsed.status());
    return;
  }
  std::unique_ptr<InferRequest> request = std::move(parsed->request);
  infer_encoding_ = std::move(parsed->encoding);
  infer_response_coding_ = response_coding;
  std::vector<ClassifyOutput> classify;
  for (const OutputEncoding& o : infer_encoding_.outputs) {
    if (o.class_count > 0) classify.push_back({o.name, o.class_count});
  }
  infer_cancel_ = std::make_shared<Cancellation>();
  request->cancellation = infer_cancel_;
  request->traceparent = traceparent_;
  if (request->service_class.empty() && server_->gate() != nullptr &&
      server_->gate()->best_effort(tenant_)) {
    request->service_class = "best_effort";
  }
  auto sink = std::make_shared<HttpInferSink>(shared_from_this(), server_->MakeWorkGuard(), server_,
                                              std::move(lease_));
  StartInference(std::move(model).value(), std::move(request), std::move(classify),
                 std::move(sink));
  // An answer given at once is already posted; otherwise watch for the client leaving.
  if (infer_cancel_ != nullptr) WatchForDisconnect();
}

void Session::WatchForDisconnect() {
  stream_.socket().async_wait(
      tcp::socket::wait_read,
      beast::bind_front_handler(&Session::OnReadableWhilePending, shared_from_this()));
}

void Session::OnReadableWhilePending(beast::error_code ec) {
  if (ec == net::error::operation_aborted || infer_cancel_ == nullptr || state_ == State::kClosed) {
    return;  // answered (the watch was cancelled) or closed meanwhile
  }
  if (!ec) {
    char byte = 0;
    const ssize_t n = ::recv(stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return;  // the next request, pipelined: it stays for the next read
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      WatchForDisconnect();  // nothing there after all
      return;
    }
  }
  // The client closed the connection (or it failed) before its answer: give up on it.
  std::shared_ptr<Cancellation> cancel = std::move(infer_cancel_);
  cancel->Cancel();
  Close();
}

void Session::HandleStats(const Route& route) {
  ModelManager* manager = server_->manager();
  std::vector<ModelStatisticsEntry> entries;
  const auto add = [&](const std::string& name, int64_t version) {
    // A version unloaded since it was listed is skipped, as if it had not been ready.
    Result<std::shared_ptr<LoadedModel>> model = manager->GetModel(name, version);
    if (model.ok()) entries.push_back({name, version, (*model)->Statistics()});
  };
  if (route.model.empty()) {
    for (const ModelIndexEntry& e : manager->Index()) {
      if (e.state == ModelState::kReady) add(e.name, e.version);
    }
  } else {
    const std::vector<int64_t> ready = manager->ReadyVersions(route.model);
    if (ready.empty()) {
      SendError(Status::InvalidArgument(
          fmt::format("requested model '{}' is not available", route.model)));
      return;
    }
    if (route.version >= 0 && std::find(ready.begin(), ready.end(), route.version) == ready.end()) {
      SendError(Status::InvalidArgument(
          fmt::format("requested model version is not available for model '{}'", route.model)));
      return;
    }
    if (route.version >= 0) {
      add(route.model, route.version);
    } else {
      for (int64_t v : ready) add(route.model, v);
    }
  }
  SendJson(kHttpOk, ModelStatisticsJson(entries));
}

void Session::HandleLoggingUpdate() {
  Result<std::vector<LogSettingUpdate>> updates =
      ParseLogSettingsRequest(body_parser_->get().body());
  Status st = updates.ok() ? UpdateLogSettings(*updates) : updates.status();
  if (!st.ok()) {
    SendError(st);
    return;
  }
  SendJson(kHttpOk, LogSettingsJson(GetLogSettings()));
}

void Session::HandleTraceUpdate() {
  TraceSettings s = Tracer::Global().settings();
  Status st = ApplyTraceSettingsRequest(body_parser_->get().body(), &s);
  if (st.ok()) st = Tracer::Global().Configure(s);
  if (!st.ok()) {
    SendError(st);
    return;
  }
  SendJson(kHttpOk, TraceSettingsJson(Tracer::Global().settings()));
}

void Session::HandleRepositoryIndex(const Route& route) {
  if (!route.repository.empty()) {
    SendError(Status::Unimplemented("'repository_name' specification is not supported"));
    return;
  }
  Result<bool> ready_only = ParseRepositoryIndexRequest(body_parser_->get().body());
  if (!ready_only.ok()) {
    SendError(ready_only.status());
    return;
  }
  const std::vector<ModelIndexEntry> index = server_->manager()->Index();
  SendJson(kHttpOk, RepositoryIndexJson(index, *ready_only));
}

void Session::HandleRepositoryControl(const Route& route) {
  if (!route.repository.empty()) {
    SendError(Status::Unimplemented("'repository_name' specification is not supported"));
    return;
  }
  const bool load = route.kind == RouteKind::kRepositoryLoad;
  ModelLoadOptions options;
  ModelUnloadOptions unload_options;
  if (load) {
    Result<ModelLoadOptions> parsed = ParseRepositoryLoadRequest(body_parser_->get().body());
    if (!parsed.ok()) {
      SendError(parsed.status());
      return;
    }
    options = std::move(parsed).value();
  } else {
    Result<ModelUnloadOptions> parsed = ParseRepositoryUnloadRequest(body_parser_->get().body());
    if (!parsed.ok()) {
      SendError(parsed.status());
      return;
    }
    unload_options = *parsed;
  }
  body_parser_.reset();
  if (load && server_->draining()) {
    SendError(Status::Unavailable("the server is shutting down: no model loads"));
    return;
  }
  ModelManager* manager = server_->manager();
  net::post(server_->control_pool(), [self = shared_from_this(), work = server_->MakeWorkGuard(),
                                      manager, load, model = route.model,
                                      options = std::move(options), unload_options]() mutable {
    Status status;
    try {
      status =
          load ? manager->LoadModel(model, options) : manager->UnloadModel(model, unload_options);
    } catch (const std::exception& e) {
      status = Status::Internal(
          fmt::format("model {} of '{}' failed: {}", load ? "load" : "unload", model, e.what()));
    }
    net::any_io_executor ex = self->executor();
    net::post(
        ex, [self = std::move(self), status = std::move(status)] { self->OnControlDone(status); });
    // `work` is released here; the posted handler keeps the io_context busy.
  });
}

void Session::OnControlDone(const Status& status) {
  if (state_ == State::kClosed) return;
  if (!status.ok()) {
    SendError(status);
    return;
  }
  SendEmpty(kHttpOk);
}

// ---- Generation (the OpenAI-compatible API and Triton's generate extension) ----
//
// NOTE on generation streams. A generation answers with one JSON body, or with Server-Sent
// Events over a chunked body. The response header is written with the first chunk that has
// bytes (not before), so an error that comes before any output (a full queue, a timeout in the
// queue, a bad parameter found by the model) is still a plain error response with its status.
// Chunks arrive on the strand (HttpGenSink) and append to gen_pending_; one write is in flight
// at a time and takes everything pending as one HTTP chunk; when it completes the backlog
// counter drops by the number of model chunks it carried. After the final result, the tail (the
// usage event and "data: [DONE]", or an error event) and the last chunk are written and the
// connection goes on with its next request. While it runs, the disconnect watch of the infer
// path cancels the request when the client goes away.

namespace {}  // namespace

void Session::SendErrorBody(const Status& status, std::string body) {
  const ProtocolStatus& p = ProtocolStatusFor(status.code());
  if (p.http >= 500) KILN_LOG_WARN("HTTP {}: {}", p.http, status.ToString());
  Response res{static_cast<http::status>(p.http), version_};
  if (p.http_retry_after) res.set(http::field::retry_after, "1");
  res.set(http::field::content_type, "application/json");
  res.body() = std::move(body);
  Send(std::move(res), After::kContinue);
}

void Session::HandleOpenAiModels(const Route& route) {
  ModelManager* manager = server_->manager();
  std::vector<OpenAiModelInfo> models;
  for (const ModelIndexEntry& e : manager->Index()) {
    if (e.state != ModelState::kReady) continue;
    if (!route.model.empty() && e.name != route.model) continue;
    Result<std::shared_ptr<LoadedModel>> m = manager->GetModel(e.name, -1);
    if (!m.ok() || !(*m)->generative()) continue;
    if (!models.empty() && models.back().id == e.name) continue;  // one entry per model
    models.push_back({e.name, server_->started_unix(), "kiln"});
  }
  if (route.kind == RouteKind::kOpenAiModels) {
    SendJson(kHttpOk, ModelsListJson(models));
    return;
  }
  if (models.empty()) {
    const Status s = Status::NotFound(fmt::format("The model `{}` does not exist.", route.model));
    SendErrorBody(s, OpenAiErrorJson(s, "model"));
    return;
  }
  SendJson(kHttpOk, ModelJson(models.front()));
}

void Session::HandleOpenAi(const Route& route) {
  const bool chat = route.kind == RouteKind::kOpenAiChatCompletions;
  if (server_->draining()) {
    const Status s = Status::Unavailable("the server is shutting down: no new requests");
    SendErrorBody(s, OpenAiErrorJson(s));
    return;
  }
  std::string param;
  const std::string& body = body_parser_->get().body();
  Result<OpenAiRequest> parsed =
      chat ? ParseChatCompletionRequest(body, &param) : ParseCompletionRequest(body, &param);
  body_parser_.reset();
  if (!parsed.ok()) {
    SendErrorBody(parsed.status(), OpenAiErrorJson(parsed.status(), param));
    return;
  }
  ModelManager* manager = server_->manager();
  std::string name = parsed->model;
  if (name.empty()) {
    // No model named: the one generative model served, when there is exactly one.
    std::vector<std::string> generative;
    for (const ModelIndexEntry& e : manager->Index()) {
      if (e.state != ModelState::kReady) continue;
      Result<std::shared_ptr<LoadedModel>> m = manager->GetModel(e.name, -1);
      if (m.ok() && (*m)->generative() && (generative.empty() || generative.back() != e.name)) {
        generative.push_back(e.name);
      }
    }
    if (generative.size() != 1) {
      const Status s =
          Status::InvalidArgument("'model' is required (the server has " +
                                  std::to_string(generative.size()) + " generative models)");
      SendErrorBody(s, OpenAiErrorJson(s, "model"));
      return;
    }
    name = generative.front();
  }
  Result<std::shared_ptr<LoadedModel>> model = manager->GetModel(name, -1);
  if (!model.ok() || !(*model)->generative()) {
    const Status s =
        model.ok() || model.status().code() == StatusCode::kNotFound
            ? Status::NotFound(fmt::format(
                  "The model `{}` does not exist{}.", name,
                  model.ok() ? " as a generative model (it is a tensor model: use /v2/models/" +
                                   name + "/infer)"
                             : ""))
            : model.status();
    SendErrorBody(s, OpenAiErrorJson(s, "model"));
    return;
  }
  std::unique_ptr<GenHttpFormat> format =
      MakeOpenAiFormat(*parsed, chat, NewOpenAiResponseId(chat), UnixSecondsNow(),
                       parsed->model.empty() ? name : parsed->model);
  auto request = std::make_unique<GenerateRequest>(std::move(parsed->request));
  ApplyOpenAiDefaults(chat, request.get());
  StartGeneration(*model, std::move(request), std::move(format));
}

void Session::HandleGenerate(const Route& route) {
  const bool stream = route.kind == RouteKind::kModelGenerateStream;
  if (server_->draining()) {
    SendError(Status::Unavailable("the server is shutting down: no new inference requests"));
    return;
  }
  Result<std::shared_ptr<LoadedModel>> model =
      FindModel(*server_->manager(), route.model, route.version, [this](std::string_view name) {
        return ToStd(body_parser_->get()[beast::string_view(name.data(), name.size())]);
      });
  if (!model.ok()) {
    SendError(model.status());
    return;
  }
  if (!(*model)->generative()) {
    SendError(Status::InvalidArgument(fmt::format(
        "model '{}' is not a generative model: the generate extension needs one (use /infer)",
        route.model)));
    return;
  }
  Result<TritonGenerateRequest> parsed = ParseGenerateRequest(body_parser_->get().body());
  body_parser_.reset();
  if (!parsed.ok()) {
    SendError(parsed.status());
    return;
  }
  // Triton's rule: /generate answers once; "stream": true belongs to /generate_stream (which
  // streams whatever the parameter says).
  if (!stream && parsed->stream) {
    SendError(Status::InvalidArgument(
        "'stream' is true: /generate answers once; use /generate_stream to stream"));
    return;
  }
  std::unique_ptr<GenHttpFormat> format =
      MakeGenerateFormat(*parsed, stream, route.model, (*model)->version());
  StartGeneration(*model, std::make_unique<GenerateRequest>(std::move(parsed->request)),
                  std::move(format));
}

void Session::StartGeneration(const std::shared_ptr<LoadedModel>& model,
                              std::unique_ptr<GenerateRequest> request,
                              std::unique_ptr<GenHttpFormat> format) {
  gen_format_ = std::move(format);
  gen_backlog_ = std::make_shared<std::atomic<size_t>>(0);
  gen_started_ = gen_writing_ = gen_done_ = false;
  gen_chunked_ = version_ >= 11;
  gen_pending_.clear();
  gen_pending_chunks_ = 0;
  gen_tail_.clear();
  infer_cancel_ = std::make_shared<Cancellation>();
  request->cancellation = infer_cancel_;
  std::shared_ptr<GenerationSink> sink =
      TraceGeneration(std::make_shared<HttpGenSink>(shared_from_this(), server_->MakeWorkGuard(),
                                                    server_, gen_backlog_, std::move(lease_)),
                      model->name(), model->version(), request->id, traceparent_);
  model->Generate(std::move(request), std::move(sink));
  if (infer_cancel_ != nullptr) WatchForDisconnect();
}

void Session::OnGenChunk(GenChunk chunk) {
  if (state_ == State::kClosed || gen_format_ == nullptr) return;
  std::string bytes = gen_format_->Chunk(chunk);
  if (!gen_format_->stream() || bytes.empty()) {
    gen_backlog_->fetch_sub(1);
    return;
  }
  gen_pending_ += bytes;
  ++gen_pending_chunks_;
  PumpGeneration();
}

void Session::OnGenDone(Result<GenFinal> result) {
  if (state_ == State::kClosed || gen_format_ == nullptr) return;
  if (!gen_started_) {
    // Nothing written yet: an ordinary response.
    std::unique_ptr<GenHttpFormat> format = std::move(gen_format_);
    if (infer_cancel_ != nullptr) {
      infer_cancel_.reset();
      beast::error_code ignored;
      stream_.socket().cancel(ignored);  // ends the disconnect watch
    }
    if (!result.ok()) {
      SendErrorBody(result.status(), format->ErrorBody(result.status()));
      return;
    }
    std::string body = format->Finish(*result);
    if (!format->stream()) {
      SendJson(kHttpOk, std::move(body));
      return;
    }
    // A stream whose every chunk was empty: header, tail and end in one go.
    gen_format_ = std::move(format);
    gen_tail_ = std::move(body);
    gen_done_ = true;
    PumpGeneration();
    return;
  }
  gen_tail_ =
      result.ok() ? gen_format_->Finish(*result) : gen_format_->StreamError(result.status());
  gen_done_ = true;
  PumpGeneration();
}

void Session::PumpGeneration() {
  if (gen_writing_ || state_ == State::kClosed) return;
  if (!gen_started_) {
    gen_started_ = true;
    gen_writing_ = true;
    gen_header_.emplace(http::status::ok, version_);
    gen_header_->set(http::field::content_type, "text/event-stream; charset=utf-8");
    gen_header_->set(http::field::cache_control, "no-cache");
    if (gen_chunked_) {
      gen_header_->chunked(true);
    } else {
      keep_alive_ = false;  // HTTP/1.0: the body ends when the connection closes
    }
    gen_header_->keep_alive(keep_alive_ && !server_->stopping());
    gen_serializer_.emplace(*gen_header_);
    stream_.expires_after(kWriteTimeout);
    http::async_write_header(stream_, *gen_serializer_,
                             [self = shared_from_this()](beast::error_code ec, size_t bytes) {
                               self->OnGenWritten(0, false, ec, bytes);
                             });
    return;
  }
  if (!gen_pending_.empty()) {
    gen_out_ = std::move(gen_pending_);
    gen_pending_.clear();
    const size_t chunks = gen_pending_chunks_;
    gen_pending_chunks_ = 0;
    gen_writing_ = true;
    stream_.expires_after(kWriteTimeout);
    auto done = [self = shared_from_this(), chunks](beast::error_code ec, size_t bytes) {
      self->OnGenWritten(chunks, false, ec, bytes);
    };
    if (gen_chunked_) {
      net::async_write(stream_, http::make_chunk(net::buffer(gen_out_)), std::move(done));
    } else {
      net::async_write(stream_, net::buffer(gen_out_), std::move(done));
    }
    return;
  }
  if (gen_done_) {
    gen_out_ = std::move(gen_tail_);
    gen_tail_.clear();
    gen_writing_ = true;
    stream_.expires_after(kWriteTimeout);
    auto done = [self = shared_from_this()](beast::error_code ec, size_t bytes) {
      self->OnGenWritten(0, true, ec, bytes);
    };
    if (gen_chunked_) {
      // The tail (when any) and the last chunk in one write. (The chunk objects hold their
      // size line; async_write copies them.)
      if (gen_out_.empty()) {
        net::async_write(stream_, http::make_chunk_last(), std::move(done));
      } else {
        net::async_write(
            stream_,
            beast::buffers_cat(http::make_chunk(net::buffer(gen_out_)), http::make_chunk_last()),
            std::move(done));
      }
    } else {
      net::async_write(stream_, net::buffer(gen_out_), std::move(done));
    }
  }
}

void Session::OnGenWritten(size_t chunks, bool last, beast::error_code ec, size_t /*bytes*/) {
  gen_writing_ = false;
  gen_out_.clear();
  if (gen_backlog_ != nullptr && chunks > 0) gen_backlog_->fetch_sub(chunks);
  if (ec) {
    // The client is gone (or too slow for the write timeout): cancel the generation.
    if (infer_cancel_ != nullptr) std::shared_ptr<Cancellation>(std::move(infer_cancel_))->Cancel();
    Close();
    return;
  }
  stream_.expires_never();  // between tokens the connection may be quiet for long
  if (!last) {
    PumpGeneration();
    return;
  }
  gen_format_.reset();
  gen_serializer_.reset();
  gen_header_.reset();
  if (infer_cancel_ != nullptr) {
    infer_cancel_.reset();
    beast::error_code ignored;
    stream_.socket().cancel(ignored);  // ends the disconnect watch
  }
  if (keep_alive_ && gen_chunked_ && !server_->stopping()) {
    DoReadHeader();
    return;
  }
  CloseGracefully();
}

void Session::OnInferDone(Result<InferResponse> result) {
  if (infer_cancel_ != nullptr) {
    infer_cancel_.reset();
    beast::error_code ignored;
    stream_.socket().cancel(ignored);  // ends the disconnect watch (operation_aborted)
  }
  if (state_ == State::kClosed) return;
  if (!result.ok()) {
    SendError(result.status());
    return;
  }
  InferResponse& response = result.value();
  EncodedInferResponse encoded;
  if (Status s = EncodeInferResponse(response, infer_encoding_, &encoded); !s.ok()) {
    SendError(s);
    return;
  }
  Response res{http::status::ok, version_};
  if (encoded.binary) {
    res.set(http::field::content_type, "application/octet-stream");
    res.set("Inference-Header-Content-Length", std::to_string(encoded.json_bytes));
  } else {
    res.set(http::field::content_type, "application/json");
  }
  res.body() = std::move(encoded.body);
  if (infer_response_coding_ != ContentCoding::kIdentity) {
    // A compression failure sends the body uncompressed (KSERVE-V2.md 1.14).
    Result<std::string> compressed = Compress(res.body(), infer_response_coding_);
    if (compressed.ok()) {
      res.body() = std::move(compressed).value();
      res.set(http::field::content_encoding,
              std::string(ContentCodingName(infer_response_coding_)));
    }
  }
  Send(std::move(res), After::kContinue);
}

void Session::SendEmpty(unsigned status) {
  Response res{static_cast<http::status>(status), version_};
  Send(std::move(res), After::kContinue);
}

void Session::SendJson(unsigned status, std::string body) {
  Response res{static_cast<http::status>(status), version_};
  res.set(http::field::content_type, "application/json");
  res.body() = std::move(body);
  Send(std::move(res), After::kContinue);
}

void Session::SendError(const Status& status, After after) {
  const ProtocolStatus& p = ProtocolStatusFor(status.code());
  if (p.http >= 500) KILN_LOG_WARN("HTTP {}: {}", p.http, status.ToString());
  Response res{static_cast<http::status>(p.http), version_};
  if (p.http_retry_after) res.set(http::field::retry_after, "1");
  res.set(http::field::content_type, "application/json");
  res.body() = JsonErrorBody(status.message());
  Send(std::move(res), after);
}

void Session::SendHttpError(unsigned status, std::string_view message, After after) {
  Response res{static_cast<http::status>(status), version_};
  res.set(http::field::content_type, "application/json");
  res.body() = JsonErrorBody(message);
  Send(std::move(res), after);
}

void Session::Send(Response response, After after) {
  lease_.reset();  // answered without the model: the admission ends here
  if (state_ == State::kClosed) return;
  state_ = State::kBusy;
  if (after == After::kContinue && (!keep_alive_ || server_->stopping())) after = After::kClose;
  response.keep_alive(after == After::kContinue);
  if (head_request_) {
    const size_t n = response.body().size();
    response.body().clear();
    response.content_length(n);
  } else {
    response.prepare_payload();
  }
  response_.emplace(std::move(response));
  stream_.expires_after(kWriteTimeout);
  http::async_write(stream_, *response_,
                    beast::bind_front_handler(&Session::OnWrite, shared_from_this(), after));
}

void Session::OnWrite(After after, beast::error_code ec, size_t /*bytes*/) {
  response_.reset();
  if (ec) {
    Close();
    return;
  }
  switch (after) {
    case After::kContinue:
      if (!server_->stopping()) {
        DoReadHeader();
        return;
      }
      CloseGracefully();
      return;
    case After::kClose:
      CloseGracefully();
      return;
    case After::kLinger:
      Linger();
      return;
  }
}

void Session::Linger() {
  if (server_->stopping()) {
    CloseGracefully();
    return;
  }
  state_ = State::kLingering;
  header_parser_.reset();
  body_parser_.reset();
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) {
    Close();
    return;
  }
  linger_buffer_ = std::make_unique<char[]>(kLingerBufferBytes);
  stream_.expires_after(kLingerTimeout);  // one deadline for the whole drain
  stream_.async_read_some(net::buffer(linger_buffer_.get(), kLingerBufferBytes),
                          beast::bind_front_handler(&Session::OnLingerRead, shared_from_this()));
}

void Session::OnLingerRead(beast::error_code ec, size_t /*bytes*/) {
  if (ec || state_ != State::kLingering) {
    Close();
    return;
  }
  stream_.async_read_some(net::buffer(linger_buffer_.get(), kLingerBufferBytes),
                          beast::bind_front_handler(&Session::OnLingerRead, shared_from_this()));
}

void Session::CloseGracefully() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  Close();
}

void Session::Close() {
  state_ = State::kClosed;
  beast::error_code ec;
  stream_.socket().close(ec);
}

}  // namespace

void HttpServer::Impl::Register(const std::shared_ptr<Session>& session) {
  std::lock_guard<std::mutex> lock(sessions_mu_);
  sessions_.emplace(session.get(), session);
}

void HttpServer::Impl::Unregister(Session* session) {
  std::lock_guard<std::mutex> lock(sessions_mu_);
  sessions_.erase(session);
}

Status HttpServer::Impl::Start() {
  std::lock_guard<std::mutex> lock(lifecycle_mu_);
  if (state_ != State::kCreated) {
    return Status::FailedPrecondition("HttpServer::Start called twice or after Stop");
  }
  if (options_.tls) {
    try {
      KILN_ASSIGN_OR_RETURN(tls_, MakeTlsContext(*options_.tls));
    } catch (const std::exception& e) {
      return Status::InvalidArgument(fmt::format("HTTPS: {}", e.what()));
    }
  }
  KILN_ASSIGN_OR_RETURN(const uint16_t port, OpenListener(ioc_, acceptor_, options_.address,
                                                          options_.port, "HTTP server"));
  port_.store(port);

  work_.emplace(ioc_.get_executor());
  DoAccept();  // no io thread runs yet, so this is race-free
  int n = options_.threads;
  if (n == 0) n = std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  try {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { RunIoLoop(); });
  } catch (const std::system_error& e) {
    state_ = State::kRunning;  // let the regular shutdown path clean up what started
    StopLocked();
    return Status::Internal(fmt::format("cannot start HTTP io threads: {}", e.what()));
  }
  state_ = State::kRunning;
  KILN_LOG_INFO("HTTP{} server listening on {}:{} ({} io threads)",
                tls_ == nullptr        ? ""
                : options_.tls->mutual ? "S (mutual TLS)"
                                       : "S",
                options_.address, port_.load(), n);
  return Status::OK();
}

void HttpServer::Impl::RunIoLoop() {
  for (;;) {
    try {
      ioc_.run();
      return;
    } catch (const std::exception& e) {
      KILN_LOG_ERROR("HTTP io thread: unexpected exception: {}", e.what());
    } catch (...) {
      KILN_LOG_ERROR("HTTP io thread: unexpected exception");
    }
  }
}

void HttpServer::Impl::DoAccept() {
  acceptor_.async_accept(net::make_strand(ioc_), beast::bind_front_handler(&Impl::OnAccept, this));
}

void HttpServer::Impl::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (stopping() || ec == net::error::operation_aborted) return;
  if (ec) {
    // E.g. out of file descriptors: back off briefly instead of spinning.
    KILN_LOG_WARN("HTTP accept failed: {}", ec.message());
    accept_retry_timer_.expires_after(kAcceptRetryDelay);
    accept_retry_timer_.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec && !stopping()) DoAccept();
    });
    return;
  }
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);  // small responses must not wait for Nagle
  const size_t limit = options_.max_connections;
  size_t open = 0;
  if (limit > 0) {
    std::lock_guard<std::mutex> lock(sessions_mu_);
    open = sessions_.size();
  }
  if (limit > 0 && open >= limit) {
    // Over the limit: one non-blocking write of a 503 (it fits the socket buffer of a fresh
    // connection; if not, the client just sees the close), then the connection is closed.
    const std::string body = JsonErrorBody(fmt::format(
        "too many connections: the server accepts at most {} concurrent HTTP connections", limit));
    const std::string response = fmt::format(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        "Retry-After: 1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{}",
        body.size(), body);
    socket.non_blocking(true, ignored);
    socket.write_some(net::buffer(response), ignored);
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    socket.close(ignored);
    KILN_LOG_WARN("HTTP connection refused: {} connections open (limit {})", open, limit);
    DoAccept();
    return;
  }
  std::make_shared<Session>(std::move(socket), tls_.get(), this)->Start();
  DoAccept();
}

void HttpServer::Impl::Stop() {
  std::lock_guard<std::mutex> lock(lifecycle_mu_);
  StopLocked();
}

void HttpServer::Impl::StopLocked() {
  if (state_ != State::kRunning) {
    state_ = State::kStopped;
    return;
  }
  stopping_.store(true);
  ready_.store(false);
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    accept_retry_timer_.cancel();
  });
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard<std::mutex> sessions_lock(sessions_mu_);
    for (auto& [ptr, weak] : sessions_) {
      if (auto session = weak.lock()) live.push_back(std::move(session));
    }
  }
  for (auto& session : live) {
    net::any_io_executor ex = session->executor();
    net::post(ex, [session] { session->OnServerStop(); });
  }
  live.clear();  // may destroy a session (it unregisters itself; sessions_mu_ is not held)
  work_.reset();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  control_pool_.join();  // a load / unload still running has answered (or its session is gone)
  state_ = State::kStopped;
  KILN_LOG_INFO("HTTP server stopped");
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::Create(const HttpServerOptions& options,
                                                       ModelManager* manager) {
  if (manager == nullptr) return Status::InvalidArgument("HttpServer needs a ModelManager");
  if (options.port < 0 || options.port > 65535) {
    return Status::InvalidArgument(fmt::format("invalid HTTP port {}", options.port));
  }
  if (options.threads < 0) {
    return Status::InvalidArgument(fmt::format("invalid HTTP thread count {}", options.threads));
  }
  if (options.max_request_bytes == 0) {
    return Status::InvalidArgument("max_request_bytes must be positive");
  }
  if (options.address.empty()) return Status::InvalidArgument("empty HTTP address");
  return std::unique_ptr<HttpServer>(new HttpServer(std::make_unique<Impl>(options, manager)));
}

Status HttpServer::Start() { return impl_->Start(); }
int HttpServer::port() const { return impl_->port(); }
void HttpServer::SetReady(bool ready) { impl_->SetReady(ready); }
void HttpServer::StartDraining() { impl_->StartDraining(); }
size_t HttpServer::InferencesInFlight() const { return impl_->InferencesInFlight(); }
void HttpServer::Stop() { impl_->Stop(); }

}  // namespace kiln
