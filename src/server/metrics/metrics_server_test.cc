// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/metrics_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace kiln {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

struct Client {
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;

  explicit Client(int port) {
    stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
  }
  http::response<http::string_body> Send(http::verb method, std::string_view target) {
    http::request<http::string_body> req(method, beast::string_view(target.data(), target.size()),
                                         11);
    req.set(http::field::host, "localhost");
    req.keep_alive(true);
    http::write(stream, req);
    http::response_parser<http::string_body> parser;
    parser.skip(method == http::verb::head);
    http::read(stream, buffer, parser);
    return parser.release();
  }
};

TEST(MetricsServer, ServesTheDocumentOnGetMetricsOnly) {
  std::atomic<int> scrapes{0};
  MetricsServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  Result<std::unique_ptr<MetricsServer>> server = MetricsServer::Create(options, [&] {
    ++scrapes;
    return std::string("# TYPE up gauge\nup 1\n");
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE((*server)->Start().ok());
  ASSERT_GT((*server)->port(), 0);

  Client c((*server)->port());
  auto r = c.Send(http::verb::get, "/metrics");
  EXPECT_EQ(r.result_int(), 200);
  EXPECT_EQ(r[http::field::content_type], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r.body(), "# TYPE up gauge\nup 1\n");
  // Same connection (keep-alive): trailing slash, query, other paths and methods.
  EXPECT_EQ(c.Send(http::verb::get, "/metrics/").result_int(), 200);
  EXPECT_EQ(c.Send(http::verb::get, "/metrics?x=1").result_int(), 200);
  EXPECT_EQ(c.Send(http::verb::get, "/").result_int(), 404);
  EXPECT_EQ(c.Send(http::verb::get, "/v2/health/live").result_int(), 404);
  auto post = c.Send(http::verb::post, "/metrics");
  EXPECT_EQ(post.result_int(), 405);
  EXPECT_EQ(post[http::field::allow], "GET, HEAD");
  auto head = c.Send(http::verb::head, "/metrics");
  EXPECT_EQ(head.result_int(), 200);
  EXPECT_EQ(scrapes.load(), 4);
  (*server)->Stop();
  (*server)->Stop();  // idempotent
}

TEST(MetricsServer, ReportsABusyPortAndBadOptions) {
  MetricsServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  auto render = [] { return std::string(); };
  auto first = MetricsServer::Create(options, render);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->Start().ok());
  options.port = (*first)->port();
  auto second = MetricsServer::Create(options, render);
  ASSERT_TRUE(second.ok());
  const Status s = (*second)->Start();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("metrics server cannot bind to 127.0.0.1:"), std::string::npos)
      << s.message();
  options.port = 70000;
  EXPECT_EQ(MetricsServer::Create(options, render).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln
