// SPDX-License-Identifier: Apache-2.0
#pragma once
// The HTTP/1.1 load engine: a hand-written client over non-blocking sockets and epoll. Each
// worker thread owns its keep-alive connections and one epoll set; a connection carries one
// request at a time. Responses are parsed only as far as needed: the status line,
// Content-Length (and Connection: close), then the body is skipped. Chunked responses count as
// errors (kiln and Triton answer inference with Content-Length).

#include <memory>
#include <string>
#include <vector>

#include "bench/load.h"
#include "bench/net.h"

namespace kiln::bench {

// `requests`: complete HTTP requests (request_bytes.h), sent in rotation. REQUIRES: non-empty.
std::unique_ptr<LoadEngine> MakeHttpLoad(const Endpoint& endpoint,
                                         std::vector<std::string> requests);

}  // namespace kiln::bench
