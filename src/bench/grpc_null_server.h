// SPDX-License-Identifier: Apache-2.0
#pragma once
// The gRPC twin of NullServer (null_server.h): a KServe v2 GRPCInferenceService that does no
// work. It answers ModelMetadata and ModelConfig of an add_sub-like model (two FP32 [-1,16]
// inputs and outputs, max_batch_size 8) and every ModelInfer with one fixed response of two
// [1,16] FP32 outputs in raw_output_contents, over the gRPC async API with one completion queue
// and thread per `threads`, the way kiln's own gRPC server is built. What `kiln bench` measures
// against it is the floor of gRPC and protobuf on this machine: kiln's added latency is its
// difference to that floor.
//
// Thread safety: Start/Stop from one thread; `requests()` from any.

#include <cstdint>
#include <memory>

#include "base/result.h"

namespace kiln::bench {

class GrpcNullServer {
 public:
  // Listens on 127.0.0.1:`port` (0 = a free port) with `threads` completion-queue threads.
  static Result<std::unique_ptr<GrpcNullServer>> Start(int port, int threads = 1);
  ~GrpcNullServer();
  GrpcNullServer(const GrpcNullServer&) = delete;
  GrpcNullServer& operator=(const GrpcNullServer&) = delete;

  int port() const;
  // ModelInfer calls answered so far.
  uint64_t requests() const;
  void Stop();

 private:
  struct Impl;
  explicit GrpcNullServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::bench
