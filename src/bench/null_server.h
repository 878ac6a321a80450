// SPDX-License-Identifier: Apache-2.0
#pragma once
// A KServe v2 HTTP stand-in that does no work: it answers the model metadata and config of an
// add_sub-like model (two FP32 [-1,16] inputs and outputs, max_batch_size 8) and every POST
// with one fixed 200 inference response, from single-threaded epoll loops. It exists to measure
// `kiln bench` itself (the client's ceiling and CPU per request with a server that costs almost
// nothing) and to test the HTTP load engine without a real server.
//
// Thread safety: Start/Stop from one thread; `requests()` from any.

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "base/result.h"

namespace kiln::bench {

class NullServer {
 public:
  // Listens on 127.0.0.1:`port` (0 = a free port) with `threads` event loops.
  static Result<std::unique_ptr<NullServer>> Start(int port, int threads = 1);
  ~NullServer();
  NullServer(const NullServer&) = delete;
  NullServer& operator=(const NullServer&) = delete;

  int port() const { return port_; }
  // POST requests answered so far.
  uint64_t requests() const { return requests_.load(std::memory_order_relaxed); }
  void Stop();

 private:
  NullServer() = default;
  void Loop();

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> requests_{0};
  std::vector<std::thread> threads_;
};

}  // namespace kiln::bench
