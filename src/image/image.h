// SPDX-License-Identifier: Apache-2.0
#pragma once
// Images for the processing steps of the server (issue: pipelines): decoding JPEG and PNG from
// the bytes a client sent, and the transforms a vision model's preprocessing is made of, defined
// as Pillow and torchvision define them so that a model sees what it was trained on.
//
//   KILN_ASSIGN_OR_RETURN(Image img, DecodeImage(bytes));            // HWC, 8-bit, RGB
//   KILN_ASSIGN_OR_RETURN(img, Resize(img, 256, 256, ResizeFilter::kBilinear));
//   KILN_ASSIGN_OR_RETURN(img, CenterCrop(img, 224, 224));
//   KILN_ASSIGN_OR_RETURN(OwnedTensor x, ToNormalizedChw(img, {0.485f, 0.456f, 0.406f},
//                                                          {0.229f, 0.224f, 0.225f}));
//
// Decoding never trusts the image: the header's size is checked against DecodeOptions::max_pixels
// before any pixel memory is allocated (a 20k x 20k PNG header is refused at once), and a corrupt
// or truncated file is INVALID_ARGUMENT naming what is wrong, never a crash.
//
// Thread safety: the functions are thread-safe (no shared state).

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "tensor/tensor.h"

namespace kiln {

// 8-bit pixels, rows top to bottom, each row left to right, channels interleaved (HWC).
struct Image {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;         // 1 (gray) or 3 (RGB)
  std::vector<uint8_t> pixels;  // height * width * channels
};

enum class ColorMode {
  kRgb,   // 3 channels; gray images are replicated, alpha is dropped (as Pillow's convert("RGB"))
  kGray,  // 1 channel; color images become L = (19595 R + 38470 G + 7471 B + 0x8000) >> 16
          // (Pillow's convert("L"))
};

struct DecodeOptions {
  ColorMode color = ColorMode::kRgb;
  // The most pixels (width * height) an image may have; larger ones are refused from their header.
  int64_t max_pixels = int64_t{64} << 20;
};

// "jpeg", "png", or "" for bytes that are neither (by their signature).
std::string_view ImageFormat(std::span<const uint8_t> bytes);

// Decodes a JPEG (libjpeg-turbo, the decoder Pillow uses, with its defaults: islow DCT, fancy
// upsampling) or a PNG (libpng; palettes expanded, transparency dropped, 16-bit samples reduced
// to their high byte, where Pillow's convert("L") of a 16-bit gray image would clip at 255).
// INVALID_ARGUMENT for anything else, a corrupt or truncated file, or one over max_pixels.
Result<Image> DecodeImage(std::span<const uint8_t> bytes, const DecodeOptions& options = {});

enum class ResizeFilter {
  kNearest,   // Pillow's NEAREST: source index (i + 0.5) * in / out, truncated, in 16.16 fixed
              // point as Pillow computes it
  kBilinear,  // Pillow's BILINEAR: triangle filter, widened by the scale when shrinking
              // (antialiased, what torchvision's Resize does on PIL images)
  kArea,      // Pillow's BOX: each output pixel the mean of the input pixels it covers
  kBicubic,   // Pillow's BICUBIC (a = -0.5), widened when shrinking
};

// Resizes to out_height x out_width with Pillow's resampling (ImagingResample): a horizontal
// then a vertical pass, each a convolution with the filter's normalized weights in fixed point
// (22 fractional bits), rounded to 8 bits after each pass, so the pixels equal Pillow's.
// INVALID_ARGUMENT for a size < 1 or over DecodeOptions' default pixel limit.
Result<Image> Resize(const Image& image, int64_t out_height, int64_t out_width,
                     ResizeFilter filter);

// The torchvision Resize of a single size: the shorter side becomes `size`, the other keeps the
// aspect ratio (int(size * long / short), truncated).
Result<Image> ResizeShorterSide(const Image& image, int64_t size, ResizeFilter filter);

// torchvision's CenterCrop: top = round((H - h) / 2), left = round((W - w) / 2), Python's round
// (halves to even). INVALID_ARGUMENT when the crop is larger than the image (torchvision pads;
// kiln refuses).
Result<Image> CenterCrop(const Image& image, int64_t height, int64_t width);

// FP32 [channels, height, width]: pixel / 255 (torchvision's ToTensor), then (x - mean[c]) /
// std[c] (Normalize) when mean and std are given (one value per channel, or one for all).
Result<OwnedTensor> ToNormalizedChw(const Image& image, std::span<const float> mean = {},
                                    std::span<const float> std = {});

}  // namespace kiln
