// SPDX-License-Identifier: Apache-2.0
// Microbenchmark of kiln's decoder matrix kernels (src/llm/llm_matmul.h) on TinyLlama-1.1B's
// shapes; not a test. For each weight type and shape it times MatMul at 1, 16 and 512 tokens
// and prints the weight bytes streamed per second (the decode figure, to compare with the
// machine's read bandwidth, measured first with a STREAM-like read loop over 1 GiB) and the
// GFLOP/s (2 * rows * cols * tokens per call), both from the fastest call (the median is shown
// too: on a shared machine the fastest call is the kernel's own speed).
//
//   OMP_NUM_THREADS=2 build/src/llm/llm_matmul_bench [--types q4_0,q8_0,...] [--tokens 1,16,512]
//       [--shapes 2048x2048,...] [--min-time 0.5] [--isa avx512|avx2|scalar] [--no-vnni]
//       [--cpu-time] [--in-cache] [--no-pack] [--no-bandwidth]
//
// --cpu-time times calls by CPU time instead of wall time (one thread: the thread's; several:
// the process's divided by the thread count, with OMP_WAIT_POLICY=passive), for a machine
// shared with other work. --in-cache uses one copy of each matrix (by default calls cycle
// through copies of at least 256 MiB in all, so that weights stream from memory as in decode).
// The matrices are packed (PackedWeights) where the kernels read a packed copy, as a loaded model
// is; --no-pack runs them as stored. At the end, the TinyLlama-1.1B model's matrix products per
// token are summed from the rows.
//
// Shapes are ROWSxCOLS (out x in features): q/o 2048x2048, k/v 256x2048, gate/up 5632x2048,
// down 2048x5632, output 32000x2048.

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"
#include "llm/ggml_quants.h"
#include "llm/llm_matmul.h"

namespace {

using kiln::llm::GgmlType;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of the calling thread (--cpu-time with one thread) or of the process divided by the
// thread count (--cpu-time with several, meant for OMP_WAIT_POLICY=passive so that waiting
// threads sleep): the kernel's time even when the machine is shared and threads are
// descheduled now and then (for several threads, as if their parts ran perfectly in parallel).
double CpuTime() {
  timespec ts;
  const int threads = omp_get_max_threads();
  clock_gettime(threads == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec)) / threads;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    const size_t e = s.find(',', b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

bool ParseType(const std::string& name, GgmlType* t) {
  static const std::pair<const char*, GgmlType> kTypes[] = {
      {"f32", GgmlType::kF32},   {"f16", GgmlType::kF16},   {"bf16", GgmlType::kBF16},
      {"q8_0", GgmlType::kQ8_0}, {"q4_0", GgmlType::kQ4_0}, {"q4_K", GgmlType::kQ4_K},
      {"q6_K", GgmlType::kQ6_K}};
  for (const auto& [n, v] : kTypes) {
    if (name == n) {
      *t = v;
      return true;
    }
  }
  return false;
}

// Sums n 64-bit words (n a multiple of 32) with 256-bit loads, 4 independent accumulators.
__attribute__((target("avx2"))) uint64_t SumAvx2(const uint64_t* p, int64_t n) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t i = 0; i < n; i += 16) {
    s0 = _mm256_add_epi64(s0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    s1 = _mm256_add_epi64(s1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    s2 = _mm256_add_epi64(s2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    s3 = _mm256_add_epi64(s3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  alignas(32) uint64_t out[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out),
                     _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
  return out[0] + out[1] + out[2] + out[3];
}

uint64_t SumScalar(const uint64_t* p, int64_t n) {
  uint64_t s[8] = {};
  for (int64_t i = 0; i < n; i += 8) {
    for (int k = 0; k < 8; ++k) s[k] += p[i + k];
  }
  return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

// Read bandwidth (STREAM-like): sums 1 GiB of 64-bit words split over the OpenMP team, each
// thread a contiguous part, best of 5 passes.
double ReadBandwidth(bool cpu_time) {
  const int64_t n = (int64_t{1} << 30) / 8;
  auto* buf =
      static_cast<uint64_t*>(::operator new[](static_cast<size_t>(n) * 8, std::align_val_t{64}));
  kiln::cpu::ParallelFor(n / 32, 1 << 12, [&](int64_t b, int64_t e) {
    for (int64_t i = 32 * b; i < 32 * e; ++i)
      buf[i] = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  });
  const bool avx2 = __builtin_cpu_supports("avx2");
  double best = 0;
  volatile uint64_t sink = 0;
  for (int pass = 0; pass < 5; ++pass) {
    std::vector<uint64_t> part(256, 0);
    const double t0 = cpu_time ? CpuTime() : Now();
    kiln::cpu::ParallelFor(n / 32, 1 << 12, [&](int64_t b, int64_t e) {
      const uint64_t s =
          avx2 ? SumAvx2(buf + 32 * b, 32 * (e - b)) : SumScalar(buf + 32 * b, 32 * (e - b));
      part[static_cast<size_t>(omp_get_thread_num()) % part.size()] += s;
    });
    const double dt = (cpu_time ? CpuTime() : Now()) - t0;
    uint64_t total = 0;
    for (uint64_t v : part) total += v;
    sink = sink + total;
    best = std::max(best, static_cast<double>(n * 8) / dt / 1e9);
  }
  ::operator delete[](buf, std::align_val_t{64});
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> types = {"q4_0", "q8_0", "q4_K", "q6_K", "f16"};
  std::vector<std::string> token_list = {"1", "16", "512"};
  std::vector<std::string> shape_list = {"2048x2048", "256x2048", "5632x2048", "2048x5632",
                                         "32000x2048"};
  double min_time = 0.5;
  bool bandwidth = true;
  bool rotate = true;
  bool pack = true;
  bool cpu_mode = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--types") {
      types = Split(next());
    } else if (a == "--tokens") {
      token_list = Split(next());
    } else if (a == "--shapes") {
      shape_list = Split(next());
    } else if (a == "--min-time") {
      min_time = std::atof(next().c_str());
    } else if (a == "--isa") {
      kiln::cpu::Isa isa;
      if (!kiln::cpu::ParseIsa(next(), &isa)) {
        std::fprintf(stderr, "unknown --isa\n");
        return 2;
      }
      kiln::cpu::SetMaxIsa(isa);
    } else if (a == "--no-vnni") {
      kiln::llm::SetMatMulVnniAllowed(false);
    } else if (a == "--cpu-time") {  // CPU time (see CpuTime), not wall time
      cpu_mode = true;
    } else if (a == "--no-pack") {
      pack = false;
    } else if (a == "--in-cache") {  // one copy of each matrix: its kernels' speed from cache
      rotate = false;
    } else if (a == "--no-bandwidth") {
      bandwidth = false;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  std::printf("threads %d, kernels %s, %s\n", omp_get_max_threads(), kiln::llm::MatMulKernelName(),
              cpu_mode ? "CPU time per call (best)" : "wall time per call (best)");
  double bw = 0;
  if (bandwidth) {
    bw = ReadBandwidth(cpu_mode);
    std::printf("read bandwidth (1 GiB, %d threads): %.1f GB/s\n", omp_get_max_threads(), bw);
  }
  std::printf("%-6s %-11s %6s %10s %10s %9s %9s %8s\n", "type", "shape", "tokens", "best us",
              "median us", "GB/s", "GFLOP/s", "%bw");
  std::map<std::string, double> best_time;  // "type shape tokens" -> seconds per call
  int64_t tuned_prefetch = 0;
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const std::string& tname : types) {
    GgmlType type;
    if (!ParseType(tname, &type)) {
      std::fprintf(stderr, "unknown type %s\n", tname.c_str());
      return 2;
    }
    for (const std::string& shape : shape_list) {
      const int64_t rows = std::atoll(shape.c_str());
      const int64_t cols = std::atoll(shape.c_str() + shape.find('x') + 1);
      const size_t row_bytes = kiln::llm::RowBytes(type, cols);
      const size_t matrix_bytes = row_bytes * static_cast<size_t>(rows);
      // Copies of the matrix cycled through, 256 MiB at least, so that every call streams its
      // weights from memory as decode does (a model is much larger than the L3 cache).
      const size_t copies = rotate ? std::max<size_t>(1, (size_t{256} << 20) / matrix_bytes) : 1;
      std::vector<uint8_t> wbytes(matrix_bytes * copies);
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        for (float& v : row) v = dist(rng) * 0.02f;
        if (!kiln::llm::QuantizeRow(type, row.data(), wbytes.data() + r * row_bytes, cols).ok()) {
          return 1;
        }
      }
      for (size_t k = 1; k < copies; ++k) {
        std::memcpy(wbytes.data() + k * matrix_bytes, wbytes.data(), matrix_bytes);
      }
      std::vector<kiln::llm::WeightMatrix> ws;
      for (size_t k = 0; k < copies; ++k) {
        ws.push_back({type, rows, cols, wbytes.data() + k * matrix_bytes, row_bytes});
      }
      std::vector<kiln::llm::WeightMatrix*> to_pack;
      for (kiln::llm::WeightMatrix& w : ws) to_pack.push_back(&w);
      const std::unique_ptr<kiln::llm::PackedWeights> packed =
          pack ? kiln::llm::PackedWeights::Pack(to_pack) : nullptr;
      // As a loaded model does: the packed kernels' prefetch distance timed on these copies.
      if (packed != nullptr && tuned_prefetch == 0) {
        tuned_prefetch = kiln::llm::TunePackedPrefetch(to_pack);
        std::printf("# packed prefetch distance: %lld bytes (timed on %s %s)\n",
                    static_cast<long long>(tuned_prefetch), tname.c_str(), shape.c_str());
      }
      for (const std::string& tk : token_list) {
        const int64_t n = std::atoll(tk.c_str());
        std::vector<float> x(static_cast<size_t>(n * cols)), y(static_cast<size_t>(n * rows));
        for (float& v : x) v = dist(rng);
        size_t next = 0;
        kiln::llm::MatMul(ws[next++ % copies], x.data(), cols, n, y.data(), rows);  // warm-up
        // The fastest call of those in min_time (at least 3): the machine may be shared, and
        // a call that lost its core to another process says nothing about the kernel.
        std::vector<double> times, cpu_times;
        const double t0 = Now();
        do {
          const double c0 = Now(), u0 = CpuTime();
          kiln::llm::MatMul(ws[next++ % copies], x.data(), cols, n, y.data(), rows);
          times.push_back(Now() - c0);
          cpu_times.push_back(CpuTime() - u0);
        } while (Now() - t0 < min_time || times.size() < 3);
        std::sort(times.begin(), times.end());
        std::sort(cpu_times.begin(), cpu_times.end());
        const double per = cpu_mode ? cpu_times[0] : times[0];
        const double median = times[times.size() / 2];
        const double gbs = static_cast<double>(matrix_bytes) / per / 1e9;
        const double gflops = 2.0 * rows * cols * n / per / 1e9;
        std::printf("%-6s %-11s %6lld %10.1f %10.1f %9.1f %9.1f %7.0f%%\n", tname.c_str(),
                    shape.c_str(), static_cast<long long>(n), per * 1e6, median * 1e6, gbs, gflops,
                    bw > 0 ? 100.0 * gbs / bw : 0.0);
        std::fflush(stdout);
        best_time[tname + " " + shape + " " + tk] = per;
      }
    }
  }
  // TinyLlama-1.1B's matrix products per token, from the shapes above: 22 layers of q and o
  // (2048x2048), k and v (256x2048), gate and up (5632x2048), down (2048x5632); the output
  // (32000x2048) for every token in decode (1 token per call), for the last token only in a
  // prompt chunk (n tokens per call).
  bool header = false;
  for (const std::string& tname : types) {
    for (const std::string& tk : token_list) {
      auto get = [&](const char* shape, const std::string& n) {
        const auto it = best_time.find(tname + " " + shape + " " + n);
        return it == best_time.end() ? -1.0 : it->second;
      };
      const double qo = get("2048x2048", tk), kv = get("256x2048", tk);
      const double gu = get("5632x2048", tk), down = get("2048x5632", tk);
      const double out = get("32000x2048", tk == "1" ? tk : "1");
      if (qo < 0 || kv < 0 || gu < 0 || down < 0 || out < 0) continue;
      if (!header) {
        std::printf(
            "\nTinyLlama-1.1B matrix products (22 layers + output), from the rows above:\n");
        header = true;
      }
      const double n = std::atof(tk.c_str());
      const double call = 22 * (2 * qo + 2 * kv + 2 * gu + down) + out;
      std::printf("%-6s tokens/call %-5s %8.1f tokens/s (%.2f ms per call)\n", tname.c_str(),
                  tk.c_str(), n / call, call * 1e3);
    }
  }
  return 0;
}
