// SPDX-License-Identifier: Apache-2.0
// kiln_image_check IN OUT.npy [--gray] [--max-pixels N] [--resize H W FILTER]
//                  [--shorter SIZE FILTER] [--crop H W] [--normalize M1,M2,M3 S1,S2,S3] [--chw]
// Decodes IN, applies the steps in the order given, and writes the result as .npy: UINT8 HWC, or
// FP32 CHW after --chw / --normalize. FILTER: nearest, bilinear, area, bicubic. Errors go to
// stderr with exit code 1. For image_ops_test.py, which compares with Pillow and torchvision.

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "image/image.h"
#include "tensor/npy.h"

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "kiln_image_check: %s\n", message.c_str());
  return 1;
}

bool ParseFilter(const std::string& s, kiln::ResizeFilter* f) {
  if (s == "nearest")
    *f = kiln::ResizeFilter::kNearest;
  else if (s == "bilinear")
    *f = kiln::ResizeFilter::kBilinear;
  else if (s == "area")
    *f = kiln::ResizeFilter::kArea;
  else if (s == "bicubic")
    *f = kiln::ResizeFilter::kBicubic;
  else
    return false;
  return true;
}

std::vector<float> Floats(const std::string& s) {
  std::vector<float> v;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) v.push_back(std::strtof(item.c_str(), nullptr));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return Fail("usage: kiln_image_check IN OUT.npy [steps...]");
  std::ifstream f(argv[1], std::ios::binary);
  if (!f) return Fail(std::string("cannot read ") + argv[1]);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)),
                                   std::istreambuf_iterator<char>());
  kiln::DecodeOptions options;
  std::vector<std::string> args(argv + 3, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--gray") options.color = kiln::ColorMode::kGray;
    if (args[i] == "--max-pixels" && i + 1 < args.size()) {
      options.max_pixels = std::atoll(args[i + 1].c_str());
    }
  }
  kiln::Result<kiln::Image> image = kiln::DecodeImage(bytes, options);
  if (!image.ok()) return Fail(image.status().ToString());
  kiln::Image img = std::move(image).value();
  kiln::OwnedTensor out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    kiln::ResizeFilter filter;
    if (a == "--resize" && i + 3 < args.size() && ParseFilter(args[i + 3], &filter)) {
      auto r = kiln::Resize(img, std::atoll(args[i + 1].c_str()), std::atoll(args[i + 2].c_str()),
                            filter);
      if (!r.ok()) return Fail(r.status().ToString());
      img = std::move(r).value();
      i += 3;
    } else if (a == "--shorter" && i + 2 < args.size() && ParseFilter(args[i + 2], &filter)) {
      auto r = kiln::ResizeShorterSide(img, std::atoll(args[i + 1].c_str()), filter);
      if (!r.ok()) return Fail(r.status().ToString());
      img = std::move(r).value();
      i += 2;
    } else if (a == "--crop" && i + 2 < args.size()) {
      auto r =
          kiln::CenterCrop(img, std::atoll(args[i + 1].c_str()), std::atoll(args[i + 2].c_str()));
      if (!r.ok()) return Fail(r.status().ToString());
      img = std::move(r).value();
      i += 2;
    } else if (a == "--normalize" && i + 2 < args.size()) {
      const std::vector<float> mean = Floats(args[i + 1]), std = Floats(args[i + 2]);
      auto r = kiln::ToNormalizedChw(img, mean, std);
      if (!r.ok()) return Fail(r.status().ToString());
      out = std::move(r).value();
      i += 2;
    } else if (a == "--chw") {
      auto r = kiln::ToNormalizedChw(img);
      if (!r.ok()) return Fail(r.status().ToString());
      out = std::move(r).value();
    } else if (a == "--max-pixels") {
      ++i;
    } else if (a != "--gray") {
      return Fail("bad step at '" + a + "'");
    }
  }
  if (!out.valid()) {
    out = kiln::OwnedTensor::Allocate(kiln::DataType::kUint8,
                                      kiln::Shape{img.height, img.width, img.channels})
              .value();
    std::copy(img.pixels.begin(), img.pixels.end(), out.data<uint8_t>());
  }
  kiln::Result<std::string> npy = kiln::WriteNpy(out.view());
  if (!npy.ok()) return Fail(npy.status().ToString());
  std::ofstream o(argv[2], std::ios::binary);
  o << *npy;
  return o ? 0 : Fail(std::string("cannot write ") + argv[2]);
}
