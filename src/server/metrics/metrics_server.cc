// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/metrics_server.h"

#include <fmt/format.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <exception>
#include <optional>
#include <system_error>
#include <thread>

#include "base/check.h"
#include "base/logging.h"
#include "base/mutex.h"
#include "server/listener.h"
#include "server/metrics/exposition.h"

namespace kiln {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr std::chrono::seconds kIdleTimeout{30};
constexpr size_t kMaxRequestBytes = 8 * 1024;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, const MetricsServer::RenderFn* render,
             const MetricsServerOptions* options)
      : stream_(std::move(socket)), render_(render), options_(options) {}

  void Start() { Read(); }

 private:
  void Read() {
    parser_.emplace();
    parser_->header_limit(kMaxRequestBytes);
    parser_->body_limit(kMaxRequestBytes);
    stream_.expires_after(kIdleTimeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec) return Close();  // closed by the client, timed out, or malformed / too large
    const http::request<http::string_body>& req = parser_->get();
    response_ = {};
    response_.version(req.version());
    response_.keep_alive(req.keep_alive());
    response_.set(http::field::server, "kiln");
    const std::string_view target(req.target().data(), req.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    if (path != "/metrics" && path != "/metrics/") {
      response_.result(http::status::not_found);
      response_.set(http::field::content_type, "text/plain; charset=utf-8");
      response_.body() = "Not Found\n";
    } else if (req.method() != http::verb::get && req.method() != http::verb::head) {
      response_.result(http::status::method_not_allowed);
      response_.set(http::field::allow, "GET, HEAD");
      response_.set(http::field::content_type, "text/plain; charset=utf-8");
      response_.body() = "Method Not Allowed\n";
    } else if (Status allowed = Authorize(req); !allowed.ok()) {
      const bool unauthenticated = allowed.code() == StatusCode::kUnauthenticated;
      response_.result(unauthenticated ? http::status::unauthorized : http::status::forbidden);
      if (unauthenticated) response_.set(http::field::www_authenticate, "Bearer realm=\"kiln\"");
      response_.set(http::field::content_type, "text/plain; charset=utf-8");
      response_.body() = allowed.message() + "\n";
    } else {
      response_.result(http::status::ok);
      response_.set(http::field::content_type,
                    std::string(kExpositionContentType.data(), kExpositionContentType.size()));
      response_.body() = (*render_)();
    }
    response_.prepare_payload();
    if (req.method() == http::verb::head) response_.body().clear();  // keeps Content-Length
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code wec, size_t) {
                        if (wec || !self->response_.keep_alive()) return self->Close();
                        self->Read();
                      });
  }

  Status Authorize(const http::request<http::string_body>& req) const {
    if (!options_->authorize) return Status::OK();
    const beast::string_view auth = req[http::field::authorization];
    return options_->authorize(std::string_view(auth.data(), auth.size()));
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  const MetricsServer::RenderFn* render_;
  const MetricsServerOptions* options_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
};

}  // namespace

class MetricsServer::Impl {
 public:
  Impl(MetricsServerOptions options, RenderFn render)
      : options_(std::move(options)), render_(std::move(render)), acceptor_(ioc_) {}

  Status Start() KILN_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (started_) return Status::FailedPrecondition("MetricsServer::Start called twice");
    started_ = true;
    KILN_ASSIGN_OR_RETURN(const uint16_t port, OpenListener(ioc_, acceptor_, options_.address,
                                                            options_.port, "metrics server"));
    port_.store(port);
    Accept();
    try {
      thread_ = std::thread([this] { Run(); });
    } catch (const std::system_error& e) {
      beast::error_code ignored;
      acceptor_.close(ignored);
      return Status::Internal(fmt::format("cannot start the metrics io thread: {}", e.what()));
    }
    return Status::OK();
  }

  void Stop() KILN_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (!thread_.joinable()) return;
    ioc_.stop();  // abandons the pending operations; their connections close with ioc_
    thread_.join();
    beast::error_code ignored;
    acceptor_.close(ignored);
  }

  int port() const { return port_.load(); }

 private:
  void Accept() {
    acceptor_.async_accept(ioc_, [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec) std::make_shared<Connection>(std::move(socket), &render_, &options_)->Start();
      Accept();
    });
  }

  void Run() {
    for (;;) {
      try {
        ioc_.run();
        return;
      } catch (const std::exception& e) {
        KILN_LOG_ERROR("metrics io thread: unexpected exception: {}", e.what());
      } catch (...) {
        KILN_LOG_ERROR("metrics io thread: unexpected exception");
      }
    }
  }

  const MetricsServerOptions options_;
  const RenderFn render_;
  net::io_context ioc_{1};
  tcp::acceptor acceptor_;
  std::atomic<int> port_{0};
  Mutex mu_;
  bool started_ KILN_GUARDED_BY(mu_) = false;
  std::thread thread_ KILN_GUARDED_BY(mu_);
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<MetricsServer>> MetricsServer::Create(const MetricsServerOptions& options,
                                                             RenderFn render) {
  KILN_CHECK(render != nullptr, "MetricsServer::Create: empty render callback");
  if (options.port < 0 || options.port > 65535) {
    return Status::InvalidArgument(
        fmt::format("metrics port {} is outside 0..65535", options.port));
  }
  return std::unique_ptr<MetricsServer>(
      new MetricsServer(std::make_unique<Impl>(options, std::move(render))));
}

MetricsServer::~MetricsServer() { Stop(); }

Status MetricsServer::Start() { return impl_->Start(); }
int MetricsServer::port() const { return impl_->port(); }
void MetricsServer::Stop() { impl_->Stop(); }

}  // namespace kiln
