// SPDX-License-Identifier: Apache-2.0
// The gRPC load engine and control client against GrpcNullServer (a server that does no work).
#include "bench/grpc_load.h"

#include <gtest/gtest.h>

#include <thread>

#include "bench/grpc_null_server.h"
#include "bench/net.h"

namespace kiln::bench {
namespace {

TEST(GrpcLoadTest, ControlReadsTheModelAndClosedLoopKeepsCallsInFlight) {
  auto started = GrpcNullServer::Start(0, 2);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<GrpcNullServer> server = std::move(*started);
  const std::string url = "127.0.0.1:" + std::to_string(server->port());

  std::unique_ptr<ControlClient> control = MakeGrpcControl(url);
  Result<ModelInfo> info = control->GetModel("add_sub", "");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->max_batch_size, 8);
  ASSERT_EQ(info->inputs.size(), 2u);
  EXPECT_EQ(info->inputs[1].name, "INPUT1");
  EXPECT_EQ(info->inputs[0].shape, (std::vector<int64_t>{-1, 16}));
  // The null server has no statistics: an error, not a crash or made-up numbers.
  EXPECT_FALSE(control->GetStats("add_sub", "").ok());

  InputOptions options;
  Result<std::vector<InputSet>> inputs = MakeInputs(*info, options);
  ASSERT_TRUE(inputs.ok()) << inputs.status().ToString();
  auto engine = MakeGrpcLoad(url, "add_sub", "", *inputs, info->outputs);
  LoadConfig config;
  config.concurrency = 4;
  config.threads = 1;
  const int64_t start = NowNs();
  ASSERT_TRUE(engine->Start(config, start).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  engine->Stop();
  std::vector<Sample> samples;
  std::map<int, std::string> errors;
  engine->TakeSamples(samples, errors);
  ASSERT_GT(samples.size(), 50u);
  EXPECT_TRUE(errors.empty());
  for (const Sample& s : samples) {
    ASSERT_EQ(s.status, 0);
    ASSERT_GT(s.latency_ns, 0);
    ASSERT_GE(s.done_ns - s.latency_ns, start);
  }
  EXPECT_GE(server->requests(), samples.size());
  EXPECT_LE(server->requests(), samples.size() + 4);
}

}  // namespace
}  // namespace kiln::bench
