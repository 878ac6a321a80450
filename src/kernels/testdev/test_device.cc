// SPDX-License-Identifier: Apache-2.0
#include "kernels/testdev/test_device.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "backend/backend.h"
#include "base/mutex.h"
#include "kernels/registry.h"
#include "tensor/runtime_value.h"

namespace kiln {
namespace {

std::atomic<int64_t> g_launches{0}, g_to_device{0}, g_to_host{0}, g_on_device{0};
std::atomic<int64_t> g_allocated{0}, g_live{0}, g_pinned_live{0};

constexpr unsigned char kFreedPoison = 0xDD;
constexpr unsigned char kCopyPoison = 0xA5;

// Host memory handed out as another device's (or as pinned host memory): every block is
// remembered, so that Owns can tell it from other memory, and poisoned when freed.
class TrackedAllocator final : public Allocator {
 public:
  TrackedAllocator(Device device, std::atomic<int64_t>* live) : device_(device), live_(live) {}

  Result<void*> Allocate(size_t bytes, size_t alignment) override {
    const size_t size = std::max<size_t>(bytes, 1);
    void* p =
        ::operator new (size, std::align_val_t{std::max<size_t>(alignment, 64)}, std::nothrow);
    if (p == nullptr) {
      return Status::ResourceExhausted("test device: out of memory for " + std::to_string(bytes) +
                                       " bytes");
    }
    {
      MutexLock lock(mu_);
      blocks_[reinterpret_cast<uintptr_t>(p)] = size;
    }
    live_->fetch_add(static_cast<int64_t>(size));
    if (device_.type == DeviceType::kTest) g_allocated.fetch_add(static_cast<int64_t>(size));
    return p;
  }

  void Free(void* ptr, size_t bytes) override {
    size_t size = 0;
    {
      MutexLock lock(mu_);
      auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
      if (it == blocks_.end()) return;  // not ours: nothing to free
      size = it->second;
      blocks_.erase(it);
    }
    (void)bytes;
    std::memset(ptr, kFreedPoison, size);
    live_->fetch_sub(static_cast<int64_t>(size));
    ::operator delete (ptr, std::align_val_t{64});
  }

  Device device() const override { return device_; }

  bool Owns(const void* ptr) const {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    MutexLock lock(mu_);
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin()) return false;
    --it;
    return p >= it->first && p < it->first + it->second;
  }

 private:
  const Device device_;
  std::atomic<int64_t>* const live_;
  mutable Mutex mu_;
  std::map<uintptr_t, size_t> blocks_ KILN_GUARDED_BY(mu_);  // start -> size
};

class TestBufferType final : public BufferType {
 public:
  TestBufferType(std::string name, Device device, bool host, std::atomic<int64_t>* live)
      : name_(std::move(name)), host_(host), allocator_(device, live) {}
  std::string_view name() const override { return name_; }
  Allocator& allocator() override { return allocator_; }
  bool host_accessible() const override { return host_; }
  bool Owns(const void* ptr) const override { return allocator_.Owns(ptr); }

 private:
  const std::string name_;
  const bool host_;
  TrackedAllocator allocator_;
};

// Shared by the event handed out and the marker task on the stream.
struct EventState {
  Mutex mu;
  CondVar cv;
  bool done KILN_GUARDED_BY(mu) = false;
  Status status KILN_GUARDED_BY(mu);
};

class TestEvent final : public Event {
 public:
  explicit TestEvent(std::shared_ptr<EventState> state) : state_(std::move(state)) {}
  Status Synchronize() override {
    MutexLock lock(state_->mu);
    state_->cv.Wait(state_->mu, [&]() KILN_REQUIRES(state_->mu) { return state_->done; });
    return state_->status;
  }
  bool Ready() const override {
    MutexLock lock(state_->mu);
    return state_->done;
  }

 private:
  std::shared_ptr<EventState> state_;
};

class TestStream final : public Stream {
 public:
  TestStream(TestBufferType* device_memory, int max_jitter_us, uint32_t seed)
      : device_memory_(device_memory), max_jitter_us_(max_jitter_us), rng_(seed) {
    worker_ = std::thread([this] { Work(); });
  }
  ~TestStream() override {
    {
      MutexLock lock(mu_);
      stop_ = true;
      cv_.NotifyAll();
    }
    worker_.join();
  }

  Device device() const override { return Device::Test(0); }

  void Launch(std::function<Status()> work) override {
    Push([work = std::move(work)] {
      g_launches.fetch_add(1);
      return work();
    });
  }

  void CopyAsync(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    // The destination is the stream's until the copy ran: poisoned now, so that a reader that
    // did not wait for the copy sees garbage.
    std::memset(dst, kCopyPoison, bytes);
    const bool src_dev = device_memory_->Owns(src), dst_dev = device_memory_->Owns(dst);
    Push([dst, src, bytes, src_dev, dst_dev] {
      std::memcpy(dst, src, bytes);
      (src_dev ? (dst_dev ? g_on_device : g_to_host) : g_to_device).fetch_add(1);
      return Status::OK();
    });
  }

  std::unique_ptr<Event> Record() override {
    auto state = std::make_shared<EventState>();
    Push(
        [this, state] {
          Status s = CurrentStatus();
          MutexLock lock(state->mu);
          state->done = true;
          state->status = std::move(s);
          state->cv.NotifyAll();
          return Status::OK();
        },
        /*always=*/true);
    return std::make_unique<TestEvent>(std::move(state));
  }

  void Wait(std::shared_ptr<Event> event) override {
    Push([event = std::move(event)] { return event->Synchronize(); });
  }

  Status Synchronize() override {
    MutexLock lock(mu_);
    cv_.Wait(mu_, [&]() KILN_REQUIRES(mu_) { return queue_.empty() && !busy_; });
    return status_;
  }

 private:
  struct Task {
    std::function<Status()> fn;
    bool always = false;  // runs even after the stream failed (event markers)
  };

  void Push(std::function<Status()> fn, bool always = false) {
    MutexLock lock(mu_);
    queue_.push_back({std::move(fn), always});
    cv_.NotifyAll();
  }

  Status CurrentStatus() {
    MutexLock lock(mu_);
    return status_;
  }

  void Work() {
    MutexLock lock(mu_);
    while (true) {
      cv_.Wait(mu_, [&]() KILN_REQUIRES(mu_) { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      Task task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      const bool skip = !status_.ok() && !task.always;
      const int jitter = max_jitter_us_ > 0
                             ? static_cast<int>(rng_() % static_cast<uint32_t>(max_jitter_us_ + 1))
                             : 0;
      lock.Unlock();
      Status s;
      if (!skip) {
        if (jitter > 0) std::this_thread::sleep_for(std::chrono::microseconds(jitter));
        s = task.fn();
      }
      lock.Lock();
      if (!s.ok() && status_.ok()) status_ = std::move(s);
      busy_ = false;
      cv_.NotifyAll();
    }
  }

  TestBufferType* const device_memory_;
  const int max_jitter_us_;
  std::mt19937 rng_;  // the worker's only
  Mutex mu_;
  CondVar cv_;  // with mu_: work pushed, work done, stop
  std::deque<Task> queue_ KILN_GUARDED_BY(mu_);
  bool busy_ KILN_GUARDED_BY(mu_) = false;
  bool stop_ KILN_GUARDED_BY(mu_) = false;
  Status status_ KILN_GUARDED_BY(mu_);
  std::thread worker_;
};

class TestBackend final : public Backend {
 public:
  explicit TestBackend(int max_jitter_us)
      : max_jitter_us_(max_jitter_us),
        memory_("test:0", Device::Test(0), /*host=*/false, &g_live),
        pinned_("test_pinned", Device::Cpu(), /*host=*/true, &g_pinned_live) {}

  Device device() const override { return Device::Test(0); }
  std::string name() const override { return "test:0 (kiln's test device)"; }
  BufferType& buffer_type() override { return memory_; }
  BufferType& host_buffer_type() override { return pinned_; }
  bool async() const override { return true; }
  Result<std::unique_ptr<Stream>> CreateStream() override {
    return std::unique_ptr<Stream>(
        std::make_unique<TestStream>(&memory_, max_jitter_us_, seed_.fetch_add(1)));
  }

 private:
  const int max_jitter_us_;
  std::atomic<uint32_t> seed_{1};
  TestBufferType memory_;
  TestBufferType pinned_;
};

// ---------------------------------------------------------------------------------------------
// Kernels: the CPU's, run on the stream's thread.

class TestDeviceKernel final : public Kernel {
 public:
  TestDeviceKernel(std::unique_ptr<Kernel> inner, std::string op)
      : inner_(std::move(inner)), op_(std::move(op)) {}

  Status Compute(KernelContext& ctx) const override {
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.input(i);
      if (t.valid() && t.device().type != DeviceType::kTest) {
        return Status::Internal("test device kernel " + op_ + ": input " + std::to_string(i) +
                                " is on " + t.device().ToString() + ", not copied to the device");
      }
    }
    Stream* stream = ctx.stream();
    if (stream == nullptr || stream->device().type != DeviceType::kTest) {
      return Status::Internal("test device kernel " + op_ + " was run without the device's stream");
    }
    // The CPU kernel sees the device's memory (host memory underneath) as host tensors, and
    // allocates its outputs from the device's memory.
    const int n_in = ctx.num_inputs();
    std::vector<Tensor> inputs(static_cast<size_t>(n_in));
    std::vector<const RuntimeValue*> values(static_cast<size_t>(n_in), nullptr);
    for (int i = 0; i < n_in; ++i) {
      const Tensor& t = ctx.input(i);
      if (t.valid()) {
        inputs[static_cast<size_t>(i)] = Tensor(t.dtype(), t.shape(), t.raw_data(), Device::Cpu());
      }
      values[static_cast<size_t>(i)] = ctx.value_input(i);
    }
    std::vector<OwnedTensor> outputs(static_cast<size_t>(ctx.num_outputs()));
    std::vector<RuntimeValue> value_outputs(static_cast<size_t>(ctx.num_outputs()));
    KernelContext inner(inputs, values, outputs, value_outputs, ctx.allocator());
    inner.set_input_owners(ctx.input_owners());
    stream->Launch([this, &inner] { return inner_->Compute(inner); });
    KILN_RETURN_IF_ERROR(stream->Synchronize());
    for (int o = 0; o < ctx.num_outputs(); ++o) {
      if (outputs[static_cast<size_t>(o)].valid()) {
        ctx.SetOutputValue(o, RuntimeValue(std::move(outputs[static_cast<size_t>(o)])));
      }
    }
    return Status::OK();
  }
  bool TakesNonTensorValues() const override { return inner_->TakesNonTensorValues(); }
  int64_t PackedWeightBytes() const override { return inner_->PackedWeightBytes(); }
  std::string_view Note() const override { return inner_->Note(); }
  std::string Implementation() const override { return inner_->Implementation(); }

 private:
  std::unique_ptr<Kernel> inner_;
  std::string op_;
};

TestDeviceOptions& Options() {
  static TestDeviceOptions* options = new TestDeviceOptions();
  return *options;
}

bool TestSupports(const KernelInfo& info) {
  // String tensors are host objects: the device holds numbers only.
  for (int i = 0; i < info.num_inputs(); ++i) {
    if (info.input_type(i).dtype == DataType::kBytes) return false;
  }
  for (int i = 0; i < info.num_outputs(); ++i) {
    if (info.output_type(i).dtype == DataType::kBytes) return false;
  }
  const std::vector<std::string>& declined = Options().declined_ops;
  if (info.node().domain.empty() &&
      std::find(declined.begin(), declined.end(), info.op_type()) != declined.end()) {
    return false;
  }
  // The device takes what the CPU runs fast: nodes whose best CPU kernel is a reference kernel
  // stay on the CPU.
  Result<const KernelDef*> cpu = KernelRegistry::Global().Find(info, DeviceType::kCpu);
  return cpu.ok() && (*cpu)->provider != "ref";
}

Result<std::unique_ptr<Kernel>> CreateTestDeviceKernel(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(const KernelDef* cpu,
                        KernelRegistry::Global().Find(info, DeviceType::kCpu));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> inner, cpu->create(info));
  return std::unique_ptr<Kernel>(
      std::make_unique<TestDeviceKernel>(std::move(inner), info.node().QualifiedOp()));
}

}  // namespace

Status RegisterTestDevice(const TestDeviceOptions& options) {
  static Mutex mu;
  static bool registered = false;
  MutexLock lock(mu);
  if (registered) return Status::OK();
  Options() = options;
  KILN_RETURN_IF_ERROR(
      BackendRegistry::Register(std::make_unique<TestBackend>(options.max_jitter_us)));
  std::vector<KernelDef> defs;
  const std::deque<KernelDef>& all = KernelRegistry::Global().defs();
  for (const KernelDef& def : all) {
    if (def.device != DeviceType::kCpu || def.provider == "ref") continue;
    KernelDef d = def;
    d.device = DeviceType::kTest;
    d.provider = "test";
    d.create = CreateTestDeviceKernel;
    d.supports = TestSupports;
    defs.push_back(d);
  }
  KernelRegistry::RegisterGlobal(defs);
  registered = true;
  return Status::OK();
}

TestDeviceCounters GetTestDeviceCounters() {
  TestDeviceCounters c;
  c.launches = g_launches.load();
  c.copies_to_device = g_to_device.load();
  c.copies_to_host = g_to_host.load();
  c.copies_on_device = g_on_device.load();
  c.bytes_allocated = g_allocated.load();
  c.bytes_live = g_live.load();
  c.pinned_bytes_live = g_pinned_live.load();
  return c;
}

}  // namespace kiln
