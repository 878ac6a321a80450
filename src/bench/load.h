// SPDX-License-Identifier: Apache-2.0
#pragma once
// The load engines of `kiln bench`: worker threads that keep requests in flight and record one
// Sample per completed request.
//
// NOTE: closed loop = each of `concurrency` slots (an HTTP keep-alive connection, or a gRPC call
// slot) has exactly one request outstanding and sends the next when the answer arrives; open
// loop = requests leave at the ArrivalSchedule's intended times whatever the answers do, latency
// counting from the intended time (a request that waits for a free connection waits on the
// clock). Slots are spread over `threads` event loops. Request bytes are prebuilt; the hot path
// allocates nothing for HTTP (gRPC allocates its per-call context, as its API requires).
//
// Thread safety: Start/Stop from one controlling thread; TakeSamples may be called from it while
// the workers run (each worker's buffer has its own mutex).

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "bench/schedule.h"

namespace kiln::bench {

// status: 0 = success; > 0 = HTTP status or kGrpcStatusBase + gRPC code; kTransportError for a
// failed connection / reset / malformed response.
constexpr int kGrpcStatusBase = 1000;
constexpr int kTransportError = -1;

struct Sample {
  int64_t done_ns = 0;     // completion time (steady clock)
  int64_t latency_ns = 0;  // from the send (closed loop) or intended send (open loop)
  int64_t lag_ns = 0;      // open loop: actual send - intended send
  int32_t status = 0;
};

// "HTTP 400", "gRPC NOT_FOUND", "connection error".
std::string StatusLabel(int status);

struct LoadConfig {
  bool open_loop = false;
  int concurrency = 1;  // closed loop
  double rate = 0;      // open loop, requests/s
  Distribution distribution = Distribution::kConstant;
  uint64_t seed = 1;
  int threads = 1;
  int max_inflight = 256;  // open loop: connections (HTTP) / calls (gRPC) in flight at most
};

// Per-worker sample buffer.
class SampleSink {
 public:
  void Add(const Sample& s) {
    MutexLock lock(mu_);
    samples_.push_back(s);
  }
  void AddError(const Sample& s, const std::string& message) {
    MutexLock lock(mu_);
    samples_.push_back(s);
    if (first_errors_.size() < 16 && first_errors_.count(s.status) == 0) {
      first_errors_[s.status] = message;
    }
  }
  // Moves everything collected so far into `out` (appending).
  void Take(std::vector<Sample>& out, std::map<int, std::string>& errors) {
    MutexLock lock(mu_);
    out.insert(out.end(), samples_.begin(), samples_.end());
    samples_.clear();
    for (auto& [k, v] : first_errors_) errors.emplace(k, v);
  }

 private:
  Mutex mu_;
  std::vector<Sample> samples_ KILN_GUARDED_BY(mu_);
  std::map<int, std::string> first_errors_ KILN_GUARDED_BY(mu_);
};

class LoadEngine {
 public:
  // Derived destructors call Stop(): the workers use the derived engine's members.
  virtual ~LoadEngine() = default;
  // Starts the workers; `start_ns` is time zero of the open-loop schedule. The slots
  // (`concurrency`, or `max_inflight` in open loop) are spread over at most `threads` workers,
  // one thread each. Errors (cannot connect) name the endpoint.
  Status Start(const LoadConfig& config, int64_t start_ns);
  // Stops the workers and joins them; requests in flight are abandoned. Samples completed
  // before the stop remain available to TakeSamples until the next Start.
  void Stop();

  // Samples completed since the last call, and the first message seen per error status.
  void TakeSamples(std::vector<Sample>& out, std::map<int, std::string>& errors) {
    for (auto& s : sinks_) s->Take(out, errors);
  }
  // Requests sent so far (since construction; any thread).
  uint64_t sent() const { return sent_.load(std::memory_order_relaxed); }

  // One event loop: Run() keeps its slots busy until the engine's stop flag is set.
  class Worker {
   public:
    virtual ~Worker() = default;
    virtual void Run() = 0;
  };
  // What worker `index` of `workers` gets: its share of the slots and its sample sink.
  struct WorkerSpec {
    const LoadConfig* config;
    int index;
    int workers;
    int slots;
    SampleSink* sink;
    int64_t start_ns;
  };

 protected:
  // Checked once before the workers start (e.g. that the endpoint accepts connections).
  virtual Status CheckReachable() { return Status::OK(); }
  virtual std::unique_ptr<Worker> MakeWorker(const WorkerSpec& spec) = 0;

  std::atomic<bool> stop_{false};  // the workers' stop flag
  std::atomic<uint64_t> sent_{0};

 private:
  std::vector<std::unique_ptr<SampleSink>> sinks_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;
};

}  // namespace kiln::bench
