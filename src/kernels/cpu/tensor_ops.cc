// SPDX-License-Identifier: Apache-2.0
// Transpose for 4-byte elements (FLOAT; the bytes are only moved), parallel. (Gather is in
// index_ops.cc.)
//
// NOTE on Transpose: size-1 dims are dropped and runs of input dims that stay adjacent and in
// order under the permutation are merged, so [B,S,H,D] -> [B,H,S,D] becomes a 3-D [S,H,D] ->
// [H,S,D] swap with a contiguous D block. When the input's last (merged) dim stays last, rows of
// that length are copied with memcpy; otherwise the last two output dims are copied in 16x16
// tiles (reads and writes both stay within a few cache lines). Everything else runs on the
// reference kernel (other dtypes, non-contiguous inputs).

#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/parallel.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::cpu {
namespace {

bool IsF32Cpu(const Tensor& t) {
  return t.dtype() == DataType::kFloat32 && t.device().is_cpu() && t.is_contiguous();
}

class TransposeKernel final : public Kernel {
 public:
  TransposeKernel(std::vector<int64_t> perm, std::unique_ptr<Kernel> reference)
      : perm_(std::move(perm)), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 1 || !ctx.has_input(0) || !IsF32Cpu(ctx.input(0))) {
      return reference_->Compute(ctx);
    }
    const Tensor& x = ctx.input(0);
    const int rank = x.rank();
    std::vector<int64_t> perm = perm_;
    if (perm.empty()) {
      for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
    }
    if (static_cast<int>(perm.size()) != rank) return reference_->Compute(ctx);
    std::vector<int64_t> out_dims;
    out_dims.reserve(perm.size());
    for (int64_t p : perm) out_dims.push_back(x.dim(static_cast<int>(p)));
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, out));
    const int64_t total = x.num_elements();
    if (total == 0) return Status::OK();
    const float* px = x.data<const float>();
    float* py = y.data<float>();

    // Input strides, then the output's (dim, input stride) list without size-1 dims, merged.
    std::vector<int64_t> in_strides(static_cast<size_t>(rank), 1);
    for (int i = rank - 2; i >= 0; --i) {
      in_strides[static_cast<size_t>(i)] = in_strides[static_cast<size_t>(i) + 1] * x.dim(i + 1);
    }
    std::vector<int64_t> dims, strides;
    for (int64_t p : perm) {
      const int64_t d = x.dim(static_cast<int>(p));
      const int64_t s = in_strides[static_cast<size_t>(p)];
      if (d == 1) continue;
      if (!dims.empty() && strides.back() == s * d) {
        dims.back() *= d;
        strides.back() = s;
        continue;
      }
      dims.push_back(d);
      strides.push_back(s);
    }
    if (dims.size() <= 1) {
      std::memcpy(py, px, static_cast<size_t>(total) * sizeof(float));
      return Status::OK();
    }
    const int r = static_cast<int>(dims.size());
    if (strides.back() == 1) {
      // Contiguous rows of dims.back() elements.
      const int64_t len = dims.back();
      const int64_t rows = total / len;
      ParallelFor(rows, std::max<int64_t>(1, 8192 / len), [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          int64_t rem = row, off = 0;
          for (int d = r - 2; d >= 0; --d) {
            off += (rem % dims[static_cast<size_t>(d)]) * strides[static_cast<size_t>(d)];
            rem /= dims[static_cast<size_t>(d)];
          }
          std::memcpy(py + row * len, px + off, static_cast<size_t>(len) * sizeof(float));
        }
      });
      return Status::OK();
    }
    // Tiled copy of the last two output dims for each outer index.
    constexpr int64_t kTile = 16;
    const int64_t rows = dims[static_cast<size_t>(r - 2)], cols = dims[static_cast<size_t>(r - 1)];
    const int64_t sr = strides[static_cast<size_t>(r - 2)],
                  sc = strides[static_cast<size_t>(r - 1)];
    const int64_t outer = total / (rows * cols);
    const int64_t row_blocks = (rows + kTile - 1) / kTile;
    ParallelFor(outer * row_blocks, 4, [&](int64_t begin, int64_t end) {
      for (int64_t job = begin; job < end; ++job) {
        const int64_t o = job / row_blocks, rb = (job % row_blocks) * kTile;
        int64_t rem = o, off = 0;
        for (int d = r - 3; d >= 0; --d) {
          off += (rem % dims[static_cast<size_t>(d)]) * strides[static_cast<size_t>(d)];
          rem /= dims[static_cast<size_t>(d)];
        }
        const float* xo = px + off;
        float* yo = py + o * rows * cols;
        const int64_t re = std::min(rows, rb + kTile);
        for (int64_t cb = 0; cb < cols; cb += kTile) {
          const int64_t ce = std::min(cols, cb + kTile);
          for (int64_t i = rb; i < re; ++i) {
            for (int64_t j = cb; j < ce; ++j) yo[i * cols + j] = xo[i * sr + j * sc];
          }
        }
      }
    });
    return Status::OK();
  }

 private:
  std::vector<int64_t> perm_;
  std::unique_ptr<Kernel> reference_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateTranspose(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateTranspose(info));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ref::AttrReader(info).Ints("perm"));
  return std::make_unique<TransposeKernel>(std::move(perm), std::move(reference));
}

}  // namespace kiln::cpu
