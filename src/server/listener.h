// SPDX-License-Identifier: Apache-2.0
#pragma once
// Opening a TCP listening socket for a Beast/Asio front end (the HTTP and metrics servers).
//
//   KILN_ASSIGN_OR_RETURN(uint16_t port,
//                         OpenListener(ioc, acceptor, "0.0.0.0", 8000, "HTTP server"));

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace kiln {

// Resolves `address` (an IP literal, else a host name: the first address it resolves to), then
// opens, configures (SO_REUSEADDR), binds and listens on `acceptor`. Returns the bound port (the
// one the system picked when `port` is 0). INVALID_ARGUMENT when the address does not resolve;
// UNAVAILABLE naming `server`, the step and address:port when a socket call fails (the
// acceptor is closed again).
Result<uint16_t> OpenListener(boost::asio::io_context& ioc,
                              boost::asio::ip::tcp::acceptor& acceptor, const std::string& address,
                              int port, std::string_view server);

}  // namespace kiln
