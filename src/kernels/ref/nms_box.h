// SPDX-License-Identifier: Apache-2.0
#pragma once
// The boxes and IoU of NonMaxSuppression, shared by the reference kernel (ref/detection.cc) and
// the fast one (cpu/detection.cc) so that both make every decision with the same arithmetic.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace kiln::ref::nms {

struct Box {
  double y1, x1, y2, x2;  // y1 <= y2, x1 <= x2 (unless a coordinate is NaN)
};

// Corner boxes may come with flipped corners (min/max are taken); center boxes are
// [x_center, y_center, width, height].
inline Box MakeBox(const float* b, bool center) {
  if (center) {
    const double xc = b[0], yc = b[1], w = b[2], h = b[3];
    return {yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2};
  }
  return {std::min<double>(b[0], b[2]), std::min<double>(b[1], b[3]), std::max<double>(b[0], b[2]),
          std::max<double>(b[1], b[3])};
}

// Intersection over union; 0 for zero-area boxes and disjoint ones.
inline double Iou(const Box& a, const Box& b) {
  const double area_a = (a.y2 - a.y1) * (a.x2 - a.x1);
  const double area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  if (area_a <= 0 || area_b <= 0) return 0;
  const double ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  const double iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (ih <= 0 || iw <= 0) return 0;
  const double inter = ih * iw;
  return inter / (area_a + area_b - inter);
}

// The candidates of one (batch, class) into `order`: the boxes whose score is not NaN (and above
// the threshold when there is one), by descending score; ties keep the lower box index first.
inline void OrderCandidates(const float* scores, int64_t num_boxes, bool has_score_threshold,
                            float score_threshold, std::vector<int64_t>& order) {
  order.clear();
  for (int64_t i = 0; i < num_boxes; ++i) {
    if (std::isnan(scores[i])) continue;
    if (has_score_threshold && !(scores[i] > score_threshold)) continue;
    order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return scores[x] > scores[y]; });
}

}  // namespace kiln::ref::nms
