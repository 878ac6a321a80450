// SPDX-License-Identifier: Apache-2.0
#include "server/listener.h"

#include <fmt/format.h>

namespace kiln {

namespace net = boost::asio;
using tcp = net::ip::tcp;

Result<uint16_t> OpenListener(net::io_context& ioc, tcp::acceptor& acceptor,
                              const std::string& address, int port, std::string_view server) {
  const auto port16 = static_cast<uint16_t>(port);
  boost::system::error_code ec;
  tcp::endpoint endpoint;
  const net::ip::address ip = net::ip::make_address(address, ec);
  if (!ec) {
    endpoint = tcp::endpoint(ip, port16);
  } else {
    tcp::resolver resolver(ioc);
    const auto results = resolver.resolve(address, std::to_string(port16), ec);
    if (ec || results.empty()) {
      return Status::InvalidArgument(fmt::format("cannot resolve {} address '{}': {}", server,
                                                 address, ec ? ec.message() : "no addresses"));
    }
    endpoint = results.begin()->endpoint();
  }
  const std::string where = fmt::format("{}:{}", address, port);
  auto fail = [&](std::string_view what) {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    return Status::Unavailable(
        fmt::format("{} cannot {} {}: {}", server, what, where, ec.message()));
  };
  if (acceptor.open(endpoint.protocol(), ec)) return fail("open a socket for");
  if (acceptor.set_option(net::socket_base::reuse_address(true), ec)) {
    return fail("configure a socket for");
  }
  if (acceptor.bind(endpoint, ec)) return fail("bind to");
  if (acceptor.listen(net::socket_base::max_listen_connections, ec)) return fail("listen on");
  const tcp::endpoint local = acceptor.local_endpoint(ec);
  if (ec) return fail("read the bound port of");
  return local.port();
}

}  // namespace kiln
