// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: arbitrary bytes as an image upload. DecodeImage must return an image or an
// error Status, never crash, and never allocate for pixels past its limit (kept small here so
// that a forged header is refused); an accepted image must go through the transforms. Run with
// `make fuzz`.

#include <cstddef>
#include <cstdint>
#include <span>

#include "image/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::DecodeOptions options;
  options.max_pixels = 1 << 20;
  kiln::Result<kiln::Image> img = kiln::DecodeImage(std::span<const uint8_t>(data, size), options);
  if (!img.ok()) return 0;
  kiln::Result<kiln::Image> small = kiln::Resize(*img, 7, 5, kiln::ResizeFilter::kBilinear);
  if (small.ok()) (void)kiln::ToNormalizedChw(*small, {}, {});
  return 0;
}
