// SPDX-License-Identifier: Apache-2.0
// Serving stress: many client threads send requests with random batch sizes, priorities and
// timeouts to several models (dynamic batching with priorities and timeouts, preserve_ordering,
// plain one-at-a-time), and the manager shuts down while they are still sending. Every request
// must be answered exactly once; an answer is a correct response, or an error the request could
// legitimately get (timed out, queue full, shutting down). Built to run under TSan (Tsan build).
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <random>
#include <semaphore>
#include <sstream>
#include <thread>

#include "base/mutex.h"
#include "kernels/registry.h"
#include "repo/model_manager.h"
#include "repo/repo_test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::kiln::testing::FloatInput;
using ::kiln::testing::FloatValues;
using ::kiln::testing::TempDir;
using ::kiln::testing::WriteFile;

const fs::path kDemo = KILN_DEMO_MODELS_DIR;

std::string ReadText(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// What the clients saw, shared with the callbacks.
struct Tally {
  std::atomic<int> sent{0};
  std::atomic<int> answered{0};
  std::atomic<int> ok{0};
  std::atomic<int> wrong{0};       // a response with wrong numbers
  std::atomic<int> twice{0};       // a callback called more than once
  std::atomic<int> unexpected{0};  // an error no request here should get
  std::atomic<int> unavailable{0};
  std::atomic<int> timed_out{0};
  std::atomic<int> queue_full{0};
  Mutex mu;
  CondVar cv;  // with mu: notified on every answer
  std::string first_unexpected KILN_GUARDED_BY(mu);

  void Answer() {
    answered.fetch_add(1);
    MutexLock lock(mu);
    cv.NotifyAll();
  }
  std::string FirstUnexpected() {
    MutexLock lock(mu);
    return first_unexpected;
  }
};

void Classify(Tally& tally, const Status& s) {
  switch (s.code()) {
    case StatusCode::kUnavailable:
      tally.unavailable++;
      return;
    case StatusCode::kDeadlineExceeded:
      tally.timed_out++;
      return;
    case StatusCode::kResourceExhausted:
      tally.queue_full++;
      return;
    default: {
      tally.unexpected++;
      MutexLock lock(tally.mu);
      if (tally.first_unexpected.empty()) tally.first_unexpected = s.ToString();
    }
  }
}

TEST(ServingStressTest, ManyClientsSeveralModelsShutdownInTheMiddle) {
  const auto defs = KernelRegistry::Global().defs();
  for (std::string_view op : {"Add", "Sub", "Gemm", "Relu", "Softmax"}) {
    if (std::none_of(defs.begin(), defs.end(), [&](const KernelDef& d) { return d.op_type == op; }))
      GTEST_SKIP() << "reference kernel " << op << " missing";
  }
  ASSERT_TRUE(fs::exists(kDemo / "add_sub" / "1" / "model.onnx"));
  TempDir repo;
  const auto add_model = [&](const std::string& name, const std::string& demo,
                             const std::string& config) {
    fs::create_directories(repo.path() / name / "1");
    fs::copy_file(kDemo / demo / "1" / "model.onnx", repo.path() / name / "1" / "model.onnx");
    WriteFile(repo.path() / name / "config.pbtxt", config);
  };
  const auto add_sub_config = [&](const std::string& name, const std::string& extra) {
    std::string text = ReadText(kDemo / "add_sub" / "config.pbtxt");
    const std::string from = "name: \"add_sub\"";
    text.replace(text.find(from), from.size(), "name: \"" + name + "\"");
    return text + extra;
  };
  add_model("add_sub", "add_sub", add_sub_config("add_sub", R"cfg(
    instance_group [ { count: 1 } ]
    dynamic_batching {
      preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 200
      priority_levels: 2 default_priority_level: 2
      default_queue_policy { default_timeout_microseconds: 20000 allow_timeout_override: true }
      priority_queue_policy { key: 1 value: { max_queue_size: 16 allow_timeout_override: true } }
    })cfg"));
  add_model("add_sub_plain", "add_sub", add_sub_config("add_sub_plain", ""));
  add_model("digits", "digits", R"cfg(
    max_batch_size: 8
    instance_group [ { count: 2 } ]
    dynamic_batching { max_queue_delay_microseconds: 100 preserve_ordering: true })cfg");

  ModelManagerOptions options;
  options.repository_path = repo.path().string();
  options.instance_options.oversubscribe = true;
  Result<std::unique_ptr<ModelManager>> created = ModelManager::Create(options);
  ASSERT_TRUE(created.ok());
  std::unique_ptr<ModelManager> manager = std::move(created).value();
  ASSERT_TRUE(manager->LoadInitialModels().ok());
  std::vector<std::shared_ptr<LoadedModel>> models;
  for (const char* name : {"add_sub", "add_sub_plain", "digits"}) {
    Result<std::shared_ptr<LoadedModel>> m = manager->GetModel(name, -1);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    models.push_back(*m);
  }

  // Each client keeps up to kInFlight requests outstanding and sends until it sees the shutdown.
  constexpr int kClients = 8;
  constexpr int kInFlight = 24;
  constexpr int kAnsweredBeforeShutdown = 1500;
  Tally tally;
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<std::counting_semaphore<kInFlight>>> slots;
  slots.reserve(kClients);
  for (int c = 0; c < kClients; ++c) {
    slots.push_back(std::make_unique<std::counting_semaphore<kInFlight>>(kInFlight));
  }
  std::vector<std::thread> clients;
  clients.reserve(kClients);
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 rng(static_cast<uint32_t>(100 + c));
      std::uniform_real_distribution<float> value(-50.f, 50.f);
      std::counting_semaphore<kInFlight>& slot = *slots[static_cast<size_t>(c)];
      while (!stop.load()) {
        slot.acquire();
        const size_t which = static_cast<size_t>(rng() % models.size());
        const int64_t batch = 1 + static_cast<int64_t>(rng() % 3);
        auto request = std::make_unique<InferRequest>();
        request->priority = rng() % 3;
        request->timeout_us = rng() % 4 == 0 ? 1 + rng() % 3000 : 0;
        std::vector<float> expected;
        if (which == 2) {
          std::vector<float> pixels(static_cast<size_t>(batch * 64));
          for (float& p : pixels) p = std::abs(value(rng)) / 50.f;
          request->inputs.push_back(FloatInput("pixels", {batch, 64}, pixels));
        } else {
          std::vector<float> a(static_cast<size_t>(batch * 16)), b(a.size());
          for (size_t k = 0; k < a.size(); ++k) {
            a[k] = value(rng);
            b[k] = value(rng);
            expected.push_back(a[k] + b[k]);
          }
          request->inputs.push_back(FloatInput("INPUT0", {batch, 16}, a));
          request->inputs.push_back(FloatInput("INPUT1", {batch, 16}, b));
          request->outputs = {{"OUTPUT0"}};
        }
        auto calls = std::make_shared<std::atomic<int>>(0);
        tally.sent++;
        models[which]->Infer(std::move(request), [&tally, &stop, &slot, calls, expected, which,
                                                  batch](Result<InferResponse> r) {
          if (calls->fetch_add(1) > 0) tally.twice++;
          if (r.ok()) {
            tally.ok++;
            const std::vector<float> got = FloatValues(r->outputs[0].tensor);
            if (which == 2) {
              float total = 0;
              for (float p : got) total += p;
              if (got.size() != static_cast<size_t>(batch * 10) ||
                  std::abs(total - static_cast<float>(batch)) > 1e-3f) {
                tally.wrong++;
              }
            } else if (got != expected) {
              tally.wrong++;
            }
          } else {
            if (r.status().code() == StatusCode::kUnavailable) stop.store(true);
            Classify(tally, r.status());
          }
          tally.Answer();
          slot.release();
        });
      }
    });
  }

  {  // Shut down in the middle: clients are still sending.
    MutexLock lock(tally.mu);
    tally.cv.WaitFor(tally.mu, std::chrono::seconds(120),
                     [&] { return tally.answered.load() >= kAnsweredBeforeShutdown; });
  }
  manager->Shutdown();
  const int answered_at_shutdown = tally.answered.load();
  for (std::thread& t : clients) t.join();

  EXPECT_EQ(tally.answered.load(), tally.sent.load());
  EXPECT_EQ(tally.twice.load(), 0);
  EXPECT_EQ(tally.wrong.load(), 0);
  EXPECT_EQ(tally.unexpected.load(), 0) << tally.FirstUnexpected();
  EXPECT_GT(tally.ok.load(), 0);
  EXPECT_GE(answered_at_shutdown, kAnsweredBeforeShutdown);
  EXPECT_GT(tally.unavailable.load(), 0);  // the clients saw the shutdown
  // Held references outlive the shutdown; they answer UNAVAILABLE.
  for (const auto& m : models) {
    bool refused = false;
    auto r = std::make_unique<InferRequest>();
    m->Infer(std::move(r), [&](const Result<InferResponse>& res) { refused = !res.ok(); });
    EXPECT_TRUE(refused);
  }
  uint64_t executions = 0;
  for (const auto& m : models) executions += m->Statistics().execution_count;
  EXPECT_GT(executions, 0u);
  std::printf("sent %d: ok %d, timed out %d, queue full %d, unavailable %d; %llu executions\n",
              tally.sent.load(), tally.ok.load(), tally.timed_out.load(), tally.queue_full.load(),
              tally.unavailable.load(), static_cast<unsigned long long>(executions));
}

}  // namespace
}  // namespace kiln
