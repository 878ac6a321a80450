// SPDX-License-Identifier: Apache-2.0
#pragma once
// The gRPC load engine and control client, over kiln's own generated GRPCInferenceService stub
// (src/server/grpc/grpc_service.proto). Each worker thread owns a channel (not shared with the
// other workers) and a CompletionQueue, and keeps its share of the calls in flight with the
// async API (ModelInfer with raw_input_contents). Built only with gRPC (KILN_HAVE_GRPC).

#include <memory>
#include <string>
#include <vector>

#include "bench/control.h"
#include "bench/inputs.h"
#include "bench/load.h"
#include "bench/request_bytes.h"

namespace kiln::bench {

// `url`: "host:port". The requests are built once from `inputs` (one per input set).
std::unique_ptr<LoadEngine> MakeGrpcLoad(const std::string& url, const std::string& model,
                                         const std::string& version,
                                         const std::vector<InputSet>& inputs,
                                         const std::vector<TensorSpec>& outputs,
                                         const std::vector<RequestParameter>& parameters = {});

}  // namespace kiln::bench
