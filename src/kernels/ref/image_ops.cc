// SPDX-License-Identifier: Apache-2.0
// ai.kiln ImagePreprocess (op/kiln_ops.h): encoded images in, model-ready FP32 tensors out, on
// src/image (decoding with its pixel limit, Pillow's resampling, torchvision's crop and
// normalization).

#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "image/image.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "op/kiln_ops.h"

namespace kiln::ref {
namespace {

constexpr std::string_view kOp = "ImagePreprocess";

struct ImageSteps {
  DecodeOptions decode;
  std::vector<int64_t> resize;  // [], [S] or [H, W]
  ResizeFilter filter = ResizeFilter::kBilinear;
  std::vector<int64_t> crop;  // [] or [H, W]
  std::vector<float> mean, std;
};

class ImagePreprocessKernel final : public Kernel {
 public:
  explicit ImagePreprocessKernel(ImageSteps steps) : steps_(std::move(steps)) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DataType::kBytes) {
      return OpError(kOp, "input must be BYTES (encoded images), got {}", DataTypeName(x.dtype()));
    }
    if (!(x.rank() == 1 || (x.rank() == 2 && x.dim(1) == 1))) {
      return OpError(kOp, "input must be [N] or [N, 1] encoded images, got {}",
                     x.shape().ToString());
    }
    const int64_t n = x.dim(0);
    std::vector<OwnedTensor> images;
    images.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const std::string& bytes = x.data<const std::string>()[i];
      Result<OwnedTensor> t = One(bytes);
      if (!t.ok()) return t.status().WithContext(fmt::format("{}: image {}", kOp, i));
      if (!images.empty() && t->shape() != images.front().shape()) {
        return OpError(kOp,
                       "image {} comes out {}, image 0 {}: a batch needs one size (set crop, or "
                       "resize to [H, W])",
                       i, t->shape().ToString(), images.front().shape().ToString());
      }
      images.push_back(std::move(t).value());
    }
    Shape shape = images.empty() ? Shape{0, steps_.decode.color == ColorMode::kGray ? 1 : 3, 0, 0}
                                 : Shape{n, images[0].shape().dim(0), images[0].shape().dim(1),
                                         images[0].shape().dim(2)};
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, shape));
    for (int64_t i = 0; i < n; ++i) {
      const OwnedTensor& t = images[static_cast<size_t>(i)];
      std::memcpy(y.data<float>() + i * t.num_elements(), t.raw_data(), t.size_bytes());
    }
    return Status::OK();
  }

 private:
  Result<OwnedTensor> One(const std::string& bytes) const {
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    KILN_ASSIGN_OR_RETURN(Image img, DecodeImage({data, bytes.size()}, steps_.decode));
    if (steps_.resize.size() == 1) {
      KILN_ASSIGN_OR_RETURN(img, ResizeShorterSide(img, steps_.resize[0], steps_.filter));
    } else if (steps_.resize.size() == 2) {
      KILN_ASSIGN_OR_RETURN(img, Resize(img, steps_.resize[0], steps_.resize[1], steps_.filter));
    }
    if (!steps_.crop.empty()) {
      KILN_ASSIGN_OR_RETURN(img, CenterCrop(img, steps_.crop[0], steps_.crop[1]));
    }
    return ToNormalizedChw(img, steps_.mean, steps_.std);
  }

  const ImageSteps steps_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateKilnImagePreprocess(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  ImageSteps steps;
  KILN_ASSIGN_OR_RETURN(std::string color, attrs.String("color", "RGB"));
  if (color != "RGB" && color != "GRAY") {
    return OpError(kOp, "color must be \"RGB\" or \"GRAY\", got \"{}\"", color);
  }
  steps.decode.color = color == "GRAY" ? ColorMode::kGray : ColorMode::kRgb;
  steps.resize = info.node().GetInts("resize");
  if (steps.resize.size() > 2) {
    return OpError(kOp, "resize takes [S] or [H, W], got {} values", steps.resize.size());
  }
  steps.crop = info.node().GetInts("crop");
  if (!steps.crop.empty() && steps.crop.size() != 2) {
    return OpError(kOp, "crop takes [H, W], got {} values", steps.crop.size());
  }
  for (int64_t v : steps.resize) {
    if (v < 1) return OpError(kOp, "resize sizes must be at least 1");
  }
  for (int64_t v : steps.crop) {
    if (v < 1) return OpError(kOp, "crop sizes must be at least 1");
  }
  KILN_ASSIGN_OR_RETURN(std::string filter, attrs.String("filter", "bilinear"));
  if (filter == "bilinear") {
    steps.filter = ResizeFilter::kBilinear;
  } else if (filter == "nearest") {
    steps.filter = ResizeFilter::kNearest;
  } else if (filter == "area") {
    steps.filter = ResizeFilter::kArea;
  } else if (filter == "bicubic") {
    steps.filter = ResizeFilter::kBicubic;
  } else {
    return OpError(kOp, "filter must be bilinear, nearest, area or bicubic, got \"{}\"", filter);
  }
  if (const Attribute* m = info.node().FindAttribute("mean")) steps.mean = m->floats;
  if (const Attribute* s = info.node().FindAttribute("std")) steps.std = s->floats;
  if (steps.mean.empty() != steps.std.empty()) {
    return OpError(kOp, "mean and std are given together or not at all");
  }
  steps.decode.max_pixels = info.node().GetInt("max_pixels", steps.decode.max_pixels);
  if (steps.decode.max_pixels < 1) return OpError(kOp, "max_pixels must be at least 1");
  return std::unique_ptr<Kernel>(std::make_unique<ImagePreprocessKernel>(std::move(steps)));
}

}  // namespace kiln::ref
