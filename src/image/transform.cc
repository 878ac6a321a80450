// SPDX-License-Identifier: Apache-2.0
// Resampling as Pillow defines it (ImagingResample, Resample.c): per axis, the weights of each
// output pixel over the input pixels its filter covers, the filter widened by the scale when
// shrinking (antialiasing), normalized to sum 1, held in fixed point with 22 fractional bits; a
// horizontal pass then a vertical pass, each rounded to 8 bits. Nearest is Pillow's affine
// nearest in 16.16 fixed point: source index about floor((i + 0.5) * in / out).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "image/image.h"

namespace kiln {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr int64_t kMaxPixels = int64_t{64} << 20;

struct Filter {
  double support;
  double (*weight)(double);
};

double Box(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }
double Triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}
double Cubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// One axis: for each output index, the first input index and the fixed-point weights.
struct Coefficients {
  int64_t taps = 0;  // weights per output (the widest window)
  std::vector<int64_t> first, count;
  std::vector<int32_t> weights;  // out * taps
};

Coefficients Precompute(int64_t in_size, int64_t out_size, const Filter& f) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = f.support * filterscale;
  Coefficients c;
  c.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  c.first.resize(static_cast<size_t>(out_size));
  c.count.resize(static_cast<size_t>(out_size));
  c.weights.assign(static_cast<size_t>(out_size * c.taps), 0);
  std::vector<double> k(static_cast<size_t>(c.taps));
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int64_t xmin = static_cast<int64_t>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int64_t xmax = static_cast<int64_t>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int64_t x = 0; x < xmax; ++x) {
      const double w = f.weight((static_cast<double>(x + xmin) - center + 0.5) * ss);
      k[static_cast<size_t>(x)] = w;
      ww += w;
    }
    for (int64_t x = 0; x < xmax; ++x) {
      double v = ww != 0.0 ? k[static_cast<size_t>(x)] / ww : k[static_cast<size_t>(x)];
      v *= static_cast<double>(1 << kPrecisionBits);
      c.weights[static_cast<size_t>(xx * c.taps + x)] =
          static_cast<int32_t>(v < 0 ? -0.5 + v : 0.5 + v);
    }
    c.first[static_cast<size_t>(xx)] = xmin;
    c.count[static_cast<size_t>(xx)] = xmax;
  }
  return c;
}

uint8_t Clip8(int32_t v) {
  if (v <= 0) return 0;
  v >>= kPrecisionBits;
  return v > 255 ? 255 : static_cast<uint8_t>(v);
}

// Resamples along width (horizontal) or height. Accumulates in 32 bits as Pillow does (the
// weights of one output sum to 2^22, so 255 * the largest lobe sum stays far below 2^31).
Image Pass(const Image& in, int64_t out_size, const Filter& f, bool horizontal) {
  const int64_t in_size = horizontal ? in.width : in.height;
  const Coefficients c = Precompute(in_size, out_size, f);
  Image out;
  out.channels = in.channels;
  out.height = horizontal ? in.height : out_size;
  out.width = horizontal ? out_size : in.width;
  out.pixels.resize(static_cast<size_t>(out.height * out.width * out.channels));
  const int64_t ch = in.channels;
  const uint8_t* src = in.pixels.data();
  uint8_t* dst = out.pixels.data();
  constexpr int32_t kHalf = int32_t{1} << (kPrecisionBits - 1);
  if (horizontal) {
    for (int64_t y = 0; y < out.height; ++y) {
      const uint8_t* row = src + y * in.width * ch;
      uint8_t* orow = dst + y * out.width * ch;
      for (int64_t x = 0; x < out.width; ++x) {
        const int32_t* w = &c.weights[static_cast<size_t>(x * c.taps)];
        const uint8_t* p = row + c.first[static_cast<size_t>(x)] * ch;
        const int64_t n = c.count[static_cast<size_t>(x)];
        if (ch == 3) {
          int32_t a0 = kHalf, a1 = kHalf, a2 = kHalf;
          for (int64_t t = 0; t < n; ++t) {
            a0 += p[3 * t] * w[t];
            a1 += p[3 * t + 1] * w[t];
            a2 += p[3 * t + 2] * w[t];
          }
          orow[3 * x] = Clip8(a0);
          orow[3 * x + 1] = Clip8(a1);
          orow[3 * x + 2] = Clip8(a2);
        } else {
          for (int64_t k = 0; k < ch; ++k) {
            int32_t acc = kHalf;
            for (int64_t t = 0; t < n; ++t) acc += p[t * ch + k] * w[t];
            orow[x * ch + k] = Clip8(acc);
          }
        }
      }
    }
    return out;
  }
  // Vertically: whole rows at a time, so the inner loop runs over contiguous bytes.
  const int64_t stride = in.width * ch;
  std::vector<int32_t> acc(static_cast<size_t>(stride));
  for (int64_t y = 0; y < out.height; ++y) {
    const int32_t* w = &c.weights[static_cast<size_t>(y * c.taps)];
    const int64_t first = c.first[static_cast<size_t>(y)];
    const int64_t n = c.count[static_cast<size_t>(y)];
    std::fill(acc.begin(), acc.end(), kHalf);
    for (int64_t t = 0; t < n; ++t) {
      const uint8_t* r = src + (first + t) * stride;
      const int32_t wt = w[t];
      for (int64_t i = 0; i < stride; ++i) acc[static_cast<size_t>(i)] += r[i] * wt;
    }
    uint8_t* orow = dst + y * stride;
    for (int64_t i = 0; i < stride; ++i) orow[i] = Clip8(acc[static_cast<size_t>(i)]);
  }
  return out;
}

Status CheckImage(const Image& image) {
  if (image.channels < 1 || image.height < 1 || image.width < 1 ||
      static_cast<int64_t>(image.pixels.size()) != image.height * image.width * image.channels) {
    return Status::InvalidArgument(fmt::format("malformed image {} x {} x {} with {} bytes",
                                               image.height, image.width, image.channels,
                                               image.pixels.size()));
  }
  return Status::OK();
}

}  // namespace

Result<Image> Resize(const Image& image, int64_t out_height, int64_t out_width,
                     ResizeFilter filter) {
  KILN_RETURN_IF_ERROR(CheckImage(image));
  if (out_height < 1 || out_width < 1 || out_height > kMaxPixels / out_width) {
    return Status::InvalidArgument(
        fmt::format("cannot resize to {} x {} (at least 1 x 1, at most {} pixels)", out_height,
                    out_width, kMaxPixels));
  }
  if (filter == ResizeFilter::kNearest) {
    Image out;
    out.height = out_height;
    out.width = out_width;
    out.channels = image.channels;
    out.pixels.resize(static_cast<size_t>(out_height * out_width * image.channels));
    // Pillow's affine nearest in 16.16 fixed point: source = (FIX(s / 2) + i * FIX(s)) >> 16,
    // FIX(v) = floor(v * 65536 + 0.5), s = in / out.
    auto fix = [](double v) { return static_cast<int64_t>(std::floor(v * 65536.0 + 0.5)); };
    const double sy = static_cast<double>(image.height) / static_cast<double>(out_height);
    const double sx = static_cast<double>(image.width) / static_cast<double>(out_width);
    const int64_t y0 = fix(0.5 * sy), ys = fix(sy), x0 = fix(0.5 * sx), xs = fix(sx);
    for (int64_t y = 0; y < out_height; ++y) {
      const int64_t iy = std::clamp<int64_t>((y0 + y * ys) >> 16, 0, image.height - 1);
      for (int64_t x = 0; x < out_width; ++x) {
        const int64_t ix = std::clamp<int64_t>((x0 + x * xs) >> 16, 0, image.width - 1);
        std::copy_n(&image.pixels[static_cast<size_t>((iy * image.width + ix) * image.channels)],
                    image.channels,
                    &out.pixels[static_cast<size_t>((y * out_width + x) * image.channels)]);
      }
    }
    return out;
  }
  const Filter f = filter == ResizeFilter::kArea      ? Filter{0.5, Box}
                   : filter == ResizeFilter::kBicubic ? Filter{2.0, Cubic}
                                                      : Filter{1.0, Triangle};
  Image cur = image;
  if (out_width != image.width) cur = Pass(cur, out_width, f, /*horizontal=*/true);
  if (out_height != image.height) cur = Pass(cur, out_height, f, /*horizontal=*/false);
  return cur;
}

Result<Image> ResizeShorterSide(const Image& image, int64_t size, ResizeFilter filter) {
  KILN_RETURN_IF_ERROR(CheckImage(image));
  if (size < 1) return Status::InvalidArgument(fmt::format("resize size {} is below 1", size));
  if (image.width <= image.height) {
    const int64_t h = image.width == size ? image.height : size * image.height / image.width;
    if (image.width == size) return image;
    return Resize(image, h, size, filter);
  }
  if (image.height == size) return image;
  return Resize(image, size, size * image.width / image.height, filter);
}

Result<Image> CenterCrop(const Image& image, int64_t height, int64_t width) {
  KILN_RETURN_IF_ERROR(CheckImage(image));
  if (height < 1 || width < 1 || height > image.height || width > image.width) {
    return Status::InvalidArgument(fmt::format("cannot crop {} x {} from a {} x {} image", height,
                                               width, image.height, image.width));
  }
  // Python's round() of (H - h) / 2: halves go to the even neighbour.
  auto round_half_even = [](int64_t twice) {
    const int64_t q = twice / 2;
    return (twice % 2 == 1 && q % 2 == 1) ? q + 1 : q;
  };
  const int64_t top = round_half_even(image.height - height);
  const int64_t left = round_half_even(image.width - width);
  Image out;
  out.height = height;
  out.width = width;
  out.channels = image.channels;
  out.pixels.resize(static_cast<size_t>(height * width * image.channels));
  for (int64_t y = 0; y < height; ++y) {
    std::copy_n(
        &image.pixels[static_cast<size_t>(((top + y) * image.width + left) * image.channels)],
        width * image.channels, &out.pixels[static_cast<size_t>(y * width * image.channels)]);
  }
  return out;
}

Result<OwnedTensor> ToNormalizedChw(const Image& image, std::span<const float> mean,
                                    std::span<const float> std) {
  KILN_RETURN_IF_ERROR(CheckImage(image));
  const int64_t c = image.channels;
  auto per_channel = [&](std::span<const float> v, const char* what) -> Status {
    if (!v.empty() && v.size() != 1 && static_cast<int64_t>(v.size()) != c) {
      return Status::InvalidArgument(
          fmt::format("{} has {} values for an image of {} channels", what, v.size(), c));
    }
    return Status::OK();
  };
  KILN_RETURN_IF_ERROR(per_channel(mean, "mean"));
  KILN_RETURN_IF_ERROR(per_channel(std, "std"));
  if (mean.empty() != std.empty()) {
    return Status::InvalidArgument("mean and std are given together or not at all");
  }
  for (float s : std) {
    if (!(s != 0.0f)) return Status::InvalidArgument("std values must be nonzero");
  }
  KILN_ASSIGN_OR_RETURN(
      OwnedTensor out,
      OwnedTensor::AllocateForOverwrite(DataType::kFloat32, Shape{c, image.height, image.width}));
  float* dst = out.data<float>();
  const int64_t plane = image.height * image.width;
  for (int64_t k = 0; k < c; ++k) {
    const float m = mean.empty() ? 0.0f : mean[mean.size() == 1 ? 0 : static_cast<size_t>(k)];
    const float s = std.empty() ? 1.0f : std[std.size() == 1 ? 0 : static_cast<size_t>(k)];
    for (int64_t i = 0; i < plane; ++i) {
      // torchvision: ToTensor divides by 255, then Normalize subtracts and divides, in FP32.
      const float x = static_cast<float>(image.pixels[static_cast<size_t>(i * c + k)]) / 255.0f;
      dst[k * plane + i] = mean.empty() ? x : (x - m) / s;
    }
  }
  return out;
}

}  // namespace kiln
