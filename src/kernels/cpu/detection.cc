// SPDX-License-Identifier: Apache-2.0
// NonMaxSuppression with a spatial index: the same selection as the reference kernel, found
// without testing every candidate against every kept box.
//
// NOTE on the approach. The reference keeps, per (batch, class), the boxes in descending score
// order (stable) unless their IoU with an already kept box exceeds iou_threshold. A detector's
// post-processing hands it tens of thousands of candidates (torchvision's batched NMS offsets each
// class's boxes so that one NMS call serves every class), and most of them are kept, so testing
// each candidate against every kept box is quadratic: 100 ms of SSDlite's 150 ms. Here the kept
// boxes are registered in a sparse grid of square cells about the median candidate's size, and a
// candidate is tested only against the kept boxes of the cells it covers, plus a short list of
// boxes too large (more than 64 cells) or not finite, which every candidate is tested against.
// That finds the same suppressor whenever one exists: IoU > iou_threshold >= 0 needs a
// positive-area intersection, whose interior points lie in a cell that both boxes cover (the
// cell of a coordinate is a monotonic function of it). The IoU is the reference's own
// (ref/nms_box.h), so every decision is the reference's. A candidate with a non-finite coordinate
// is tested against every kept box, as the reference does. Inputs outside this kernel's checks
// (other dtypes, wrong shapes, bad parameters) go to the reference, which reports them.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/cpu_factories.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/nms_box.h"

namespace kiln::cpu {
namespace {

using ref::nms::Box;
using ref::nms::Iou;
using ref::nms::MakeBox;

bool Finite(const Box& b) {
  return std::isfinite(b.y1) && std::isfinite(b.x1) && std::isfinite(b.y2) && std::isfinite(b.x2);
}

bool IsCpu(const Tensor& t, DataType dtype) {
  return t.dtype() == dtype && t.device().is_cpu() && t.is_contiguous();
}

// Kept boxes of one (batch, class), indexed by the grid cells they cover.
class KeptIndex {
 public:
  static constexpr int64_t kMaxCellsPerBox = 64;
  static constexpr int64_t kMaxCellsPerAxis = 1 << 20;

  // Sets the grid over the candidates `order` of `boxes`: origin at their smallest finite
  // coordinates, cell side their median larger side (at least extent / 2^20, and > 0).
  void Reset(const std::vector<Box>& boxes, const std::vector<int64_t>& order) {
    kept_.clear();
    big_.clear();
    for (auto& [key, cell] : cells_) cell.clear();
    double lo_x = INFINITY, lo_y = INFINITY, hi_x = -INFINITY, hi_y = -INFINITY;
    sides_.clear();
    for (int64_t i : order) {
      const Box& b = boxes[static_cast<size_t>(i)];
      if (!Finite(b)) continue;
      lo_x = std::min(lo_x, b.x1);
      lo_y = std::min(lo_y, b.y1);
      hi_x = std::max(hi_x, b.x2);
      hi_y = std::max(hi_y, b.y2);
      sides_.push_back(std::max(b.x2 - b.x1, b.y2 - b.y1));
    }
    if (sides_.empty()) {
      lo_x = lo_y = 0;
      hi_x = hi_y = 1;
      sides_.push_back(1);
    }
    std::nth_element(sides_.begin(),
                     sides_.begin() + static_cast<std::ptrdiff_t>(sides_.size() / 2), sides_.end());
    const double extent = std::max(hi_x - lo_x, hi_y - lo_y);
    cell_ = std::max(
        {sides_[sides_.size() / 2], extent / static_cast<double>(kMaxCellsPerAxis - 1), 1e-30});
    origin_x_ = lo_x;
    origin_y_ = lo_y;
  }

  // Whether a kept box's IoU with `b` exceeds `threshold`.
  bool Suppresses(const Box& b, double threshold) const {
    for (int32_t k : big_) {
      if (Iou(b, kept_[static_cast<size_t>(k)]) > threshold) return true;
    }
    int64_t cx1, cy1, cx2, cy2;
    if (!Cells(b, cx1, cy1, cx2, cy2)) {  // not finite: every kept box, as the reference
      for (const Box& k : kept_) {
        if (Iou(b, k) > threshold) return true;
      }
      return false;
    }
    for (int64_t cy = cy1; cy <= cy2; ++cy) {
      for (int64_t cx = cx1; cx <= cx2; ++cx) {
        auto it = cells_.find(Key(cx, cy));
        if (it == cells_.end()) continue;
        for (int32_t k : it->second) {
          if (Iou(b, kept_[static_cast<size_t>(k)]) > threshold) return true;
        }
      }
    }
    return false;
  }

  void Add(const Box& b) {
    const auto index = static_cast<int32_t>(kept_.size());
    kept_.push_back(b);
    int64_t cx1, cy1, cx2, cy2;
    if (!Cells(b, cx1, cy1, cx2, cy2) || (cx2 - cx1 + 1) * (cy2 - cy1 + 1) > kMaxCellsPerBox) {
      big_.push_back(index);
      return;
    }
    for (int64_t cy = cy1; cy <= cy2; ++cy) {
      for (int64_t cx = cx1; cx <= cx2; ++cx) cells_[Key(cx, cy)].push_back(index);
    }
  }

 private:
  static int64_t Key(int64_t cx, int64_t cy) { return cy * kMaxCellsPerAxis + cx; }

  int64_t Cell(double v, double origin) const {
    const double c = std::floor((v - origin) / cell_);
    return static_cast<int64_t>(std::clamp(c, 0.0, static_cast<double>(kMaxCellsPerAxis - 1)));
  }

  // The cell range of `b`; false when a coordinate is not finite.
  bool Cells(const Box& b, int64_t& cx1, int64_t& cy1, int64_t& cx2, int64_t& cy2) const {
    if (!Finite(b)) return false;
    cx1 = Cell(b.x1, origin_x_);
    cx2 = Cell(b.x2, origin_x_);
    cy1 = Cell(b.y1, origin_y_);
    cy2 = Cell(b.y2, origin_y_);
    return true;
  }

  double origin_x_ = 0, origin_y_ = 0, cell_ = 1;
  std::vector<Box> kept_;
  std::vector<int32_t> big_;
  std::vector<double> sides_;
  std::unordered_map<int64_t, std::vector<int32_t>> cells_;
};

class NonMaxSuppressionKernel final : public Kernel {
 public:
  NonMaxSuppressionKernel(bool center, std::unique_ptr<Kernel> reference)
      : center_(center), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 2 || !ctx.has_input(0) || !ctx.has_input(1)) {
      return reference_->Compute(ctx);
    }
    const Tensor& boxes = ctx.input(0);   // FP32 [B, N, 4]
    const Tensor& scores = ctx.input(1);  // FP32 [B, C, N]
    if (!IsCpu(boxes, DataType::kFloat32) || !IsCpu(scores, DataType::kFloat32) ||
        boxes.rank() != 3 || boxes.dim(2) != 4 || scores.rank() != 3 ||
        scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1)) {
      return reference_->Compute(ctx);  // it reports the problem
    }
    int64_t max_out = 0;
    double iou_threshold = 0;
    bool has_score_threshold = false;
    float score_threshold = 0;
    for (int i = 2; i < 5 && i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) continue;
      const Tensor& t = ctx.input(i);
      const DataType want = i == 2 ? DataType::kInt64 : DataType::kFloat32;
      if (!IsCpu(t, want) || t.num_elements() != 1) return reference_->Compute(ctx);
      if (i == 2) {
        max_out = std::max<int64_t>(0, *t.data<const int64_t>());
      } else if (i == 3) {
        iou_threshold = *t.data<const float>();
      } else {
        has_score_threshold = true;
        score_threshold = *t.data<const float>();
      }
    }
    if (!(iou_threshold >= 0 && iou_threshold <= 1)) return reference_->Compute(ctx);

    const int64_t batches = boxes.dim(0), num_boxes = boxes.dim(1), classes = scores.dim(1);
    const float* pb = boxes.data<const float>();
    const float* ps = scores.data<const float>();
    std::vector<int64_t> selected;  // triples
    std::vector<int64_t> order;
    std::vector<Box> all(static_cast<size_t>(num_boxes));
    KeptIndex index;
    for (int64_t b = 0; b < batches && max_out > 0; ++b) {
      for (int64_t i = 0; i < num_boxes; ++i) {
        all[static_cast<size_t>(i)] = MakeBox(pb + (b * num_boxes + i) * 4, center_);
      }
      for (int64_t c = 0; c < classes; ++c) {
        const float* s = ps + (b * classes + c) * num_boxes;
        ref::nms::OrderCandidates(s, num_boxes, has_score_threshold, score_threshold, order);
        index.Reset(all, order);
        int64_t count = 0;
        for (int64_t i : order) {
          if (count >= max_out) break;
          const Box& cand = all[static_cast<size_t>(i)];
          if (index.Suppresses(cand, iou_threshold)) continue;
          index.Add(cand);
          selected.insert(selected.end(), {b, c, i});
          ++count;
        }
      }
    }
    const int64_t n = static_cast<int64_t>(selected.size()) / 3;
    KILN_ASSIGN_OR_RETURN(Tensor y,
                          ctx.AllocateOutputForOverwrite(0, DataType::kInt64, Shape{n, 3}));
    std::copy(selected.begin(), selected.end(), y.data<int64_t>());
    return Status::OK();
  }

  std::string Implementation() const override { return "kiln grid"; }

 private:
  bool center_;
  std::unique_ptr<Kernel> reference_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateNonMaxSuppression(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateNonMaxSuppression(info));
  KILN_ASSIGN_OR_RETURN(bool center, ref::AttrReader(info).Bool("center_point_box", false));
  return std::make_unique<NonMaxSuppressionKernel>(center, std::move(reference));
}

}  // namespace kiln::cpu
