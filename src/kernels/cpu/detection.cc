// SPDX-License-Identifier: Apache-2.0
// NonMaxSuppression with a spatial index: the same selection as the reference kernel, found
// without testing every candidate against every kept box. RoiAlign in parallel over channels x
// rois, separable.
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
//
// NOTE on RoiAlign. The reference (ref/detection.cc, after onnxruntime) computes per output bin
// the bilinear taps of its grid of sample points (four offsets and weights each), then applies
// them to every channel, the channel loop innermost: each bin walks all C planes, which for a
// detector's FPN level (256 x 200 x 272 floats) means reading every plane from memory again for
// every bin. Here a sample's four taps are the products of its row's and its column's (the
// reference's RoiBilinear is separable: the inside test, the clamping and the weights are per
// axis), so per roi only out_h x grid rows and out_w x grid columns are kept, for all rois at
// once (in batches bounded in size), and the jobs are (channel, roi) pairs, channel-major: a
// chunk samples one plane for every roi while the plane stays in cache.
//  - max: the sample points, the weights (hy * hx, ...), the products and the maxima are the
//    reference's expressions in the same order and in double: bit-identical.
//  - avg: a bin's sum over its samples of four weighted corners is itself separable,
//    sum over input rows y and columns x of Ry(y) X[y, x] Rx(x), so each input row the roi reads
//    is reduced once by every output column's column terms (FLOAT), and each bin sums its row
//    terms over those (double): about 2x fewer operations than per sample, and 4x for rois
//    under a pixel per bin. Every tap is kept as a term, zero weights included, so inf and NaN
//    come out as in the reference (0 * inf is NaN in both); a sample outside the image adds
//    0 * X[0] as the reference's all-zero tap does. Within 1e-5 of the reference.
// Output_half_pixel / half_pixel, sampling_ratio 0 (adaptive) or fixed. FLOAT X and rois, INT64
// batch indices in range, [R > 0, 4] rois; everything else goes to the reference.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/parallel.h"
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

// --- RoiAlign -----------------------------------------------------------------------------------

// One sample coordinate along one axis: the reference's RoiBilinear (ref/detection.cc) is this
// split per axis, a sample's taps being the products of its row's and its column's.
struct AxisTap {
  int64_t low = 0, high = 0;  // input rows (multiplied by the width) or columns
  double l = 0, h = 0;        // weights of `high` and `low`
  bool inside = false;        // in [-1, size] and not NaN; else every weight of the sample is 0
};

AxisTap MakeAxisTap(double v, int64_t size, int64_t scale) {
  AxisTap t;
  if (std::isnan(v) || v < -1.0 || v > static_cast<double>(size)) return t;
  v = std::max(v, 0.0);
  int64_t low = static_cast<int64_t>(v), high;
  if (low >= size - 1) {
    high = low = size - 1;
    v = static_cast<double>(low);
  } else {
    high = low + 1;
  }
  t.l = v - static_cast<double>(low);
  t.h = 1 - t.l;
  t.low = low * scale;
  t.high = high * scale;
  t.inside = true;
  return t;
}

// The reference's GridSize: ceil(v) samples per bin, bounded.
int64_t GridSize(double v) {
  if (!(v > 0)) return 0;
  return static_cast<int64_t>(std::ceil(std::min(v, 1.0e4)));
}

class RoiAlignKernel final : public Kernel {
 public:
  RoiAlignKernel(bool max_mode, int64_t out_h, int64_t out_w, int64_t sampling_ratio,
                 float spatial_scale, bool half_pixel, std::unique_ptr<Kernel> reference)
      : max_mode_(max_mode),
        out_h_(out_h),
        out_w_(out_w),
        sampling_ratio_(sampling_ratio),
        spatial_scale_(spatial_scale),
        half_pixel_(half_pixel),
        reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 3 || ctx.num_outputs() < 1 || !ctx.has_input(0) || !ctx.has_input(1) ||
        !ctx.has_input(2)) {
      return reference_->Compute(ctx);
    }
    const Tensor& x = ctx.input(0);     // FP32 [N, C, H, W]
    const Tensor& rois = ctx.input(1);  // FP32 [R, 4]: x1, y1, x2, y2
    const Tensor& idx = ctx.input(2);   // INT64 [R]
    if (!IsCpu(x, DataType::kFloat32) || !IsCpu(rois, DataType::kFloat32) ||
        !IsCpu(idx, DataType::kInt64) || x.rank() != 4 || rois.rank() != 2 || rois.dim(1) != 4 ||
        idx.rank() != 1 || idx.dim(0) != rois.dim(0) || rois.dim(0) == 0 ||
        x.dim(2) * x.dim(3) > int64_t{1} << 31) {
      return reference_->Compute(ctx);  // it reports the problem
    }
    const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), r = rois.dim(0);
    const int64_t* pi = idx.data<const int64_t>();
    for (int64_t i = 0; i < r; ++i) {
      if (pi[i] < 0 || pi[i] >= n) return reference_->Compute(ctx);
    }
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(std::vector<int64_t>{r, c, out_h_, out_w_}));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, out));
    if (c == 0) return Status::OK();
    const float* px = x.data<const float>();
    const float* pr = rois.data<const float>();
    float* py = y.data<float>();
    const int64_t bins = out_h_ * out_w_;
    // Rois in batches whose taps stay under kMaxTaps (adaptive sampling on huge rois can ask for
    // up to 10^4 samples per bin and axis); detector-sized calls are one batch.
    constexpr size_t kMaxTaps = size_t{1} << 17;
    Batch batch;
    for (int64_t first = 0; first < r;) {
      batch.Clear();
      int64_t work = 0;
      size_t scratch = 0;
      int64_t last = first;
      while (last < r && (last == first || batch.taps.size() < kMaxTaps)) {
        const size_t pairs_before = batch.pairs.size();
        Roi g = Geometry(pr + last * 4, h, w, batch);
        g.plane = pi[last] * c * h * w;
        g.out = last * c * bins;
        const int64_t pairs = static_cast<int64_t>(batch.pairs.size() - pairs_before);
        work += max_mode_ ? g.grid_h * g.grid_w * bins
                          : pairs * (static_cast<int64_t>(g.rows_used) + out_w_);
        scratch = std::max(scratch, g.rows_used * static_cast<size_t>(out_w_));
        batch.rois.push_back(g);
        ++last;
      }
      const int64_t nb = last - first;
      const int64_t per_job = std::max<int64_t>(1, work / nb);
      // Jobs are (channel, roi), channel-major: a chunk samples one plane for all its rois while
      // the plane is in cache.
      ParallelFor(c * nb, std::max<int64_t>(1, 16384 / per_job), [&](int64_t begin, int64_t end) {
        std::vector<float> rows(scratch);
        for (int64_t job = begin; job < end; ++job) {
          const int64_t ci = job / nb;
          const Roi& g = batch.rois[static_cast<size_t>(job % nb)];
          const float* plane = px + g.plane + ci * h * w;
          float* dst = py + g.out + ci * bins;
          if (max_mode_) {
            PoolMax(g, batch, plane, dst);
          } else {
            PoolAvg(g, batch, plane, dst, rows.data());
          }
        }
      });
      first = last;
    }
    return Status::OK();
  }

  std::string Implementation() const override { return "kiln"; }

 private:
  // One term of the avg path's separable sums: weight times row (of the roi's used rows) or
  // column.
  struct Pair {
    int64_t at;
    float weight;
  };
  // One roi: its sampling grid and divisor, its ranges in the batch's arrays, its input plane
  // and output start.
  struct Roi {
    int64_t grid_h = 0, grid_w = 0;
    double count = 1;
    size_t rows = 0, cols = 0;   // first row / column AxisTap (out_h x grid_h, out_w x grid_w)
    size_t used = 0;             // avg: first of its distinct input rows (offsets) in `used`
    size_t rows_used = 0;        // and their number
    size_t starts = 0;           // avg: out_h + 1 row-pair starts, then out_w + 1 column-pair
    int64_t plane = 0, out = 0;  // element offsets
  };
  // The taps of a batch of rois.
  struct Batch {
    std::vector<Roi> rois;
    std::vector<AxisTap> taps;
    std::vector<int64_t> used;    // avg: distinct input row offsets of each roi
    std::vector<Pair> pairs;      // avg: per output row, (used row, weight); per column, (x, w)
    std::vector<int64_t> starts;  // avg: pair ranges
    std::vector<int32_t> slot;    // scratch: input row -> index in the roi's used rows
    void Clear() {
      rois.clear();
      taps.clear();
      used.clear();
      pairs.clear();
      starts.clear();
    }
  };

  // The reference's sample points of one roi, as row taps (out_h x grid_h) and column taps
  // (out_w x grid_w); for avg also the separable form of its bilinear sums (see PoolAvg).
  Roi Geometry(const float* roi, int64_t h, int64_t w, Batch& b) const {
    const double offset = half_pixel_ ? 0.5 : 0.0;
    const double sx = static_cast<double>(roi[0]) * spatial_scale_ - offset;
    const double sy = static_cast<double>(roi[1]) * spatial_scale_ - offset;
    const double ex = static_cast<double>(roi[2]) * spatial_scale_ - offset;
    const double ey = static_cast<double>(roi[3]) * spatial_scale_ - offset;
    double roi_w = ex - sx, roi_h = ey - sy;
    if (!half_pixel_) {
      roi_w = std::max(roi_w, 1.0);
      roi_h = std::max(roi_h, 1.0);
    }
    const double bin_h = roi_h / static_cast<double>(out_h_);
    const double bin_w = roi_w / static_cast<double>(out_w_);
    Roi g;
    g.grid_h = sampling_ratio_ > 0 ? sampling_ratio_ : GridSize(roi_h / out_h_);
    g.grid_w = sampling_ratio_ > 0 ? sampling_ratio_ : GridSize(roi_w / out_w_);
    g.count = static_cast<double>(std::max<int64_t>(g.grid_h * g.grid_w, 1));
    g.rows = b.taps.size();
    for (int64_t ph = 0; ph < out_h_; ++ph) {
      for (int64_t iy = 0; iy < g.grid_h; ++iy) {
        const double yy = sy + static_cast<double>(ph) * bin_h +
                          (static_cast<double>(iy) + 0.5) * bin_h / g.grid_h;
        b.taps.push_back(MakeAxisTap(yy, h, w));
      }
    }
    g.cols = b.taps.size();
    for (int64_t pw = 0; pw < out_w_; ++pw) {
      for (int64_t ix = 0; ix < g.grid_w; ++ix) {
        const double xx = sx + static_cast<double>(pw) * bin_w +
                          (static_cast<double>(ix) + 0.5) * bin_w / g.grid_w;
        b.taps.push_back(MakeAxisTap(xx, w, 1));
      }
    }
    if (max_mode_) return g;
    // avg: the distinct input rows the roi reads, in ascending order.
    const AxisTap* rows = b.taps.data() + g.rows;
    const int64_t n_rows = out_h_ * g.grid_h;
    b.slot.assign(static_cast<size_t>(h), -1);
    for (int64_t k = 0; k < n_rows; ++k) {
      if (!rows[k].inside) continue;
      b.slot[static_cast<size_t>(rows[k].low / w)] = 0;
      b.slot[static_cast<size_t>(rows[k].high / w)] = 0;
    }
    g.used = b.used.size();
    for (int64_t yi = 0; yi < h; ++yi) {
      if (b.slot[static_cast<size_t>(yi)] < 0) continue;
      b.slot[static_cast<size_t>(yi)] = static_cast<int32_t>(b.used.size() - g.used);
      b.used.push_back(yi * w);
    }
    g.rows_used = b.used.size() - g.used;
    // Per output row, the (used row, weight) terms of its inside samples; per output column, the
    // (column, weight) terms. Every tap is kept, zero weights too: 0 * inf is NaN in the
    // reference as well.
    g.starts = b.starts.size();
    for (int64_t ph = 0; ph < out_h_; ++ph) {
      b.starts.push_back(static_cast<int64_t>(b.pairs.size()));
      for (int64_t iy = 0; iy < g.grid_h; ++iy) {
        const AxisTap& t = rows[ph * g.grid_h + iy];
        if (!t.inside) continue;
        b.pairs.push_back({b.slot[static_cast<size_t>(t.low / w)], static_cast<float>(t.h)});
        b.pairs.push_back({b.slot[static_cast<size_t>(t.high / w)], static_cast<float>(t.l)});
      }
    }
    b.starts.push_back(static_cast<int64_t>(b.pairs.size()));
    const AxisTap* cols = b.taps.data() + g.cols;
    for (int64_t pw = 0; pw < out_w_; ++pw) {
      b.starts.push_back(static_cast<int64_t>(b.pairs.size()));
      for (int64_t ix = 0; ix < g.grid_w; ++ix) {
        const AxisTap& t = cols[pw * g.grid_w + ix];
        if (!t.inside) continue;
        b.pairs.push_back({t.low, static_cast<float>(t.h)});
        b.pairs.push_back({t.high, static_cast<float>(t.l)});
      }
    }
    b.starts.push_back(static_cast<int64_t>(b.pairs.size()));
    return g;
  }

  // avg: the bins of one (roi, channel). A bin's sum over its samples of the four weighted
  // corners is separable, sum over rows y and columns x of Ry(y) X[y, x] Rx(x), so each input
  // row the roi reads is first reduced by every output column's column terms (in FLOAT), and
  // each bin then sums its row terms over those (in double). Samples outside the image add
  // 0 * X[0], as in the reference.
  void PoolAvg(const Roi& g, const Batch& b, const float* plane, float* dst, float* rows) const {
    const double outside = 0.0 * static_cast<double>(plane[0]);
    const double inv_count = 1 / g.count;
    const int64_t* row_start = b.starts.data() + g.starts;
    const int64_t* col_start = row_start + out_h_ + 1;
    const Pair* pairs = b.pairs.data();
    const int64_t* used = b.used.data() + g.used;
    // Two input rows at a time: the column terms are read once for both.
    size_t u = 0;
    for (; u + 1 < g.rows_used; u += 2) {
      const float* x0 = plane + used[u];
      const float* x1 = plane + used[u + 1];
      float* t0 = rows + u * static_cast<size_t>(out_w_);
      float* t1 = t0 + out_w_;
      for (int64_t pw = 0; pw < out_w_; ++pw) {
        float s0 = 0, s1 = 0;
        for (int64_t k = col_start[pw]; k < col_start[pw + 1]; ++k) {
          s0 += pairs[k].weight * x0[pairs[k].at];
          s1 += pairs[k].weight * x1[pairs[k].at];
        }
        t0[pw] = s0;
        t1[pw] = s1;
      }
    }
    for (; u < g.rows_used; ++u) {
      const float* x0 = plane + used[u];
      float* t0 = rows + u * static_cast<size_t>(out_w_);
      for (int64_t pw = 0; pw < out_w_; ++pw) {
        float s0 = 0;
        for (int64_t k = col_start[pw]; k < col_start[pw + 1]; ++k) {
          s0 += pairs[k].weight * x0[pairs[k].at];
        }
        t0[pw] = s0;
      }
    }
    const int64_t samples = g.grid_h * g.grid_w;
    for (int64_t ph = 0; ph < out_h_; ++ph) {
      const int64_t r0 = row_start[ph], r1 = row_start[ph + 1];
      for (int64_t pw = 0; pw < out_w_; ++pw) {
        double acc = 0;
        for (int64_t k = r0; k < r1; ++k) {
          acc += static_cast<double>(pairs[k].weight) *
                 static_cast<double>(rows[pairs[k].at * out_w_ + pw]);
        }
        // Inside samples: (row terms / 2) x (column terms / 2).
        if ((r1 - r0) * (col_start[pw + 1] - col_start[pw]) < 4 * samples) acc += outside;
        dst[ph * out_w_ + pw] = static_cast<float>(acc * inv_count);
      }
    }
  }

  // max: the bins of one (roi, channel): the reference's terms, in double.
  void PoolMax(const Roi& g, const Batch& b, const float* plane, float* dst) const {
    for (int64_t ph = 0; ph < out_h_; ++ph) {
      const AxisTap* rows = b.taps.data() + g.rows + ph * g.grid_h;
      for (int64_t pw = 0; pw < out_w_; ++pw) {
        const AxisTap* cols = b.taps.data() + g.cols + pw * g.grid_w;
        double acc = 0;
        bool first = true;
        for (int64_t iy = 0; iy < g.grid_h; ++iy) {
          const AxisTap& ty = rows[iy];
          for (int64_t ix = 0; ix < g.grid_w; ++ix) {
            const AxisTap& tx = cols[ix];
            double v1, v2, v3, v4;
            if (ty.inside && tx.inside) {
              v1 = (ty.h * tx.h) * static_cast<double>(plane[ty.low + tx.low]);
              v2 = (ty.h * tx.l) * static_cast<double>(plane[ty.low + tx.high]);
              v3 = (ty.l * tx.h) * static_cast<double>(plane[ty.high + tx.low]);
              v4 = (ty.l * tx.l) * static_cast<double>(plane[ty.high + tx.high]);
            } else {  // zero weights on element 0, as the reference's tap
              v1 = v2 = v3 = v4 = 0.0 * static_cast<double>(plane[0]);
            }
            const double m = std::max(std::max(v1, v2), std::max(v3, v4));
            acc = first ? m : std::max(acc, m);
            first = false;
          }
        }
        dst[ph * out_w_ + pw] = static_cast<float>(acc);
      }
    }
  }

  bool max_mode_;
  int64_t out_h_, out_w_, sampling_ratio_;
  float spatial_scale_;
  bool half_pixel_;
  std::unique_ptr<Kernel> reference_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateNonMaxSuppression(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateNonMaxSuppression(info));
  KILN_ASSIGN_OR_RETURN(bool center, ref::AttrReader(info).Bool("center_point_box", false));
  return std::make_unique<NonMaxSuppressionKernel>(center, std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateRoiAlign(const KernelInfo& info) {
  // The reference's factory validates the attributes.
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateRoiAlign(info));
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(std::string mode, attrs.String("mode", "avg"));
  KILN_ASSIGN_OR_RETURN(std::string ctm,
                        attrs.String("coordinate_transformation_mode",
                                     info.opset() >= 16 ? "half_pixel" : "output_half_pixel"));
  KILN_ASSIGN_OR_RETURN(int64_t out_h, attrs.Int("output_height", 1));
  KILN_ASSIGN_OR_RETURN(int64_t out_w, attrs.Int("output_width", 1));
  KILN_ASSIGN_OR_RETURN(int64_t sampling_ratio, attrs.Int("sampling_ratio", 0));
  KILN_ASSIGN_OR_RETURN(float spatial_scale, attrs.Float("spatial_scale", 1.0f));
  return std::make_unique<RoiAlignKernel>(mode == "max", out_h, out_w, sampling_ratio,
                                          spatial_scale, ctm == "half_pixel", std::move(reference));
}

}  // namespace kiln::cpu
