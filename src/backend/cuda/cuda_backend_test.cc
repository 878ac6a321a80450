// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's memory, streams, events and copies. Without a GPU the tests that need one
// are skipped, saying why; registration itself is checked everywhere.

#include "backend/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace kiln {
namespace {

TEST(CudaBackendTest, RegistersEveryGpuOrNone) {
  std::string why;
  const int count = CudaDeviceCount(&why);
  Result<int> registered = RegisterCudaBackends();
  ASSERT_TRUE(registered.ok()) << registered.status().ToString();
  EXPECT_EQ(*registered, count);
  EXPECT_EQ(*RegisterCudaBackends(), count);  // once per process
  for (int i = 0; i < count; ++i) {
    Backend* b = BackendRegistry::Find(Device::Cuda(i));
    ASSERT_NE(b, nullptr) << i;
    EXPECT_TRUE(b->async());
    EXPECT_FALSE(b->buffer_type().host_accessible());
    EXPECT_TRUE(b->host_buffer_type().host_accessible());
    EXPECT_NE(b->name().find("cuda:" + std::to_string(i)), std::string::npos) << b->name();
  }
  EXPECT_EQ(BackendRegistry::Find(Device::Cuda(count)), nullptr);
  if (count == 0) {
    EXPECT_FALSE(why.empty());
    std::printf("no GPU here (%s): nothing registered, as intended\n", why.c_str());
  }
}

class CudaGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "needs a GPU: " << why;
    ASSERT_TRUE(RegisterCudaBackends().ok());
    backend_ = BackendRegistry::Find(Device::Cuda(0));
    ASSERT_NE(backend_, nullptr);
  }
  Backend* backend_ = nullptr;
};

// Pinned -> device -> device -> pinned on one stream, in order, with an event at the end.
TEST_F(CudaGpuTest, CopiesRoundTripInOrder) {
  constexpr size_t kBytes = 3 << 20;
  Allocator& dev = backend_->buffer_type().allocator();
  Allocator& pinned = backend_->host_buffer_type().allocator();
  void* h_in = pinned.Allocate(kBytes, 64).value();
  void* h_out = pinned.Allocate(kBytes, 64).value();
  void* d_a = dev.Allocate(kBytes, 256).value();
  void* d_b = dev.Allocate(kBytes, 256).value();
  EXPECT_TRUE(backend_->buffer_type().Owns(d_a));
  EXPECT_FALSE(backend_->buffer_type().Owns(h_in));
  EXPECT_TRUE(backend_->host_buffer_type().Owns(h_in));
  for (size_t i = 0; i < kBytes; ++i) static_cast<unsigned char*>(h_in)[i] = i * 7 % 251;
  std::memset(h_out, 0, kBytes);
  std::unique_ptr<Stream> s = backend_->CreateStream().value();
  s->CopyAsync(d_a, h_in, kBytes);
  s->CopyAsync(d_b, d_a, kBytes);
  s->CopyAsync(h_out, d_b, kBytes);
  std::unique_ptr<Event> done = s->Record();
  ASSERT_TRUE(done->Synchronize().ok());
  EXPECT_TRUE(done->Ready());
  EXPECT_EQ(std::memcmp(h_in, h_out, kBytes), 0);
  // A second stream that waits for an event of the first sees its copy.
  std::unique_ptr<Stream> t = backend_->CreateStream().value();
  std::memset(h_out, 0, kBytes);
  s->CopyAsync(d_b, h_in, kBytes);
  t->Wait(std::shared_ptr<Event>(s->Record()));
  t->CopyAsync(h_out, d_b, kBytes);
  ASSERT_TRUE(t->Synchronize().ok());
  EXPECT_EQ(std::memcmp(h_in, h_out, kBytes), 0);
  dev.Free(d_a, kBytes);
  dev.Free(d_b, kBytes);
  ASSERT_TRUE(s->Synchronize().ok());
  pinned.Free(h_in, kBytes);
  pinned.Free(h_out, kBytes);
}

TEST_F(CudaGpuTest, OutOfMemoryIsResourceExhausted) {
  Result<CudaMemoryInfo> info = GetCudaMemoryInfo(0);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  Result<void*> p = backend_->buffer_type().allocator().Allocate(info->total_bytes * 2, 256);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kResourceExhausted) << p.status().ToString();
}

TEST_F(CudaGpuTest, ErrorsFailTheStream) {
  std::unique_ptr<Stream> s = backend_->CreateStream().value();
  bool ran = false;
  s->Launch([] { return Status::Internal("boom"); });
  s->Launch([&] {
    ran = true;
    return Status::OK();
  });
  EXPECT_EQ(s->Synchronize().message(), "boom");
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace kiln
