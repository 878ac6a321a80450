// SPDX-License-Identifier: Apache-2.0
// Decoding refuses what it must (not an image, corrupt or truncated files, decompression bombs
// from their header alone) and the transforms compute what Pillow and torchvision define, on
// cases small enough to work out by hand. image_ops_test.py compares against Pillow itself.

#include "image/image.h"

#include <gtest/gtest.h>
#include <jpeglib.h>
#include <zlib.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace kiln {
namespace {

void Put32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
}

// A PNG chunk with its CRC.
void Chunk(std::vector<uint8_t>& png, const char* type, const std::vector<uint8_t>& data) {
  Put32(png, static_cast<uint32_t>(data.size()));
  std::vector<uint8_t> body(type, type + 4);
  body.insert(body.end(), data.begin(), data.end());
  png.insert(png.end(), body.begin(), body.end());
  Put32(png, static_cast<uint32_t>(crc32(0, body.data(), static_cast<uInt>(body.size()))));
}

// A valid PNG: `width` x `height` gray 8-bit, pixel (x, y) = x + 16 y (or, without data, a
// header and one short IDAT).
std::vector<uint8_t> GrayPng(uint32_t width, uint32_t height, bool with_data = true) {
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> ihdr;
  Put32(ihdr, width);
  Put32(ihdr, height);
  ihdr.insert(ihdr.end(), {8, 0, 0, 0, 0});  // 8-bit gray, deflate, no filter, no interlace
  Chunk(png, "IHDR", ihdr);
  {
    // Without data: one short IDAT, as a decompression bomb's first chunk would be.
    std::vector<uint8_t> raw(with_data ? 0 : 100, 0);
    for (uint32_t y = 0; with_data && y < height; ++y) {
      raw.push_back(0);  // filter: none
      for (uint32_t x = 0; x < width; ++x) raw.push_back(static_cast<uint8_t>(x + 16 * y));
    }
    uLongf n = compressBound(static_cast<uLong>(raw.size()));
    std::vector<uint8_t> z(n);
    EXPECT_EQ(compress(z.data(), &n, raw.data(), static_cast<uLong>(raw.size())), Z_OK);
    z.resize(n);
    Chunk(png, "IDAT", z);
  }
  Chunk(png, "IEND", {});
  return png;
}

// A JPEG of `width` x `height` RGB pixels (libjpeg), quality 95.
std::vector<uint8_t> Jpeg(int width, int height) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = static_cast<JDIMENSION>(width);
  c.image_height = static_cast<JDIMENSION>(height);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  jpeg_start_compress(&c, TRUE);
  std::vector<uint8_t> row(static_cast<size_t>(width) * 3);
  while (c.next_scanline < c.image_height) {
    for (int x = 0; x < width * 3; ++x) row[x] = static_cast<uint8_t>(x * 7 + c.next_scanline * 3);
    JSAMPROW r[1] = {row.data()};
    jpeg_write_scanlines(&c, r, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<uint8_t> bytes(out, out + size);
  jpeg_destroy_compress(&c);
  free(out);
  return bytes;
}

TEST(DecodeImage, PngPixelsGrayAndRgb) {
  const std::vector<uint8_t> png = GrayPng(5, 3);
  EXPECT_EQ(ImageFormat(png), "png");
  DecodeOptions gray;
  gray.color = ColorMode::kGray;
  Result<Image> g = DecodeImage(png, gray);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->height, 3);
  EXPECT_EQ(g->width, 5);
  ASSERT_EQ(g->channels, 1);
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 5; ++x) EXPECT_EQ(g->pixels[y * 5 + x], x + 16 * y);
  }
  Result<Image> rgb = DecodeImage(png);
  ASSERT_TRUE(rgb.ok());
  ASSERT_EQ(rgb->channels, 3);
  EXPECT_EQ(rgb->pixels[3 * 7 + 0], g->pixels[7]);
  EXPECT_EQ(rgb->pixels[3 * 7 + 2], g->pixels[7]);
}

TEST(DecodeImage, JpegDecodes) {
  const std::vector<uint8_t> jpeg = Jpeg(17, 9);
  EXPECT_EQ(ImageFormat(jpeg), "jpeg");
  Result<Image> img = DecodeImage(jpeg);
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  EXPECT_EQ(img->width, 17);
  EXPECT_EQ(img->height, 9);
  EXPECT_EQ(img->channels, 3);
  // Quality 95 keeps the smooth ramp within a few levels.
  EXPECT_NEAR(img->pixels[3 * 4 + 1], (3 * 4 + 1) * 7 % 256, 6);
}

// A 20000 x 20000 header is refused before any pixel memory: the file has no pixel data at all.
TEST(DecodeImage, DecompressionBombsAreRefusedFromTheHeader) {
  Result<Image> png = DecodeImage(GrayPng(20000, 20000, /*with_data=*/false));
  ASSERT_FALSE(png.ok());
  EXPECT_EQ(png.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(png.status().message(),
            "PNG image of 20000 x 20000 pixels is over the limit of 67108864 pixels");
  // A real JPEG with its frame header's size patched to 60000 x 60000.
  std::vector<uint8_t> jpeg = Jpeg(8, 8);
  bool patched = false;
  for (size_t i = 2; i + 9 < jpeg.size() && !patched; ++i) {
    if (jpeg[i] == 0xFF && (jpeg[i + 1] == 0xC0 || jpeg[i + 1] == 0xC2)) {
      jpeg[i + 5] = 0xEA, jpeg[i + 6] = 0x60, jpeg[i + 7] = 0xEA, jpeg[i + 8] = 0x60;
      patched = true;
    }
  }
  ASSERT_TRUE(patched);
  Result<Image> big = DecodeImage(jpeg);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message(),
            "JPEG image of 60000 x 60000 pixels is over the limit of 67108864 pixels");
  // The limit is an option.
  DecodeOptions small;
  small.max_pixels = 10;
  EXPECT_FALSE(DecodeImage(GrayPng(5, 3), small).ok());
}

TEST(DecodeImage, CorruptAndTruncatedFilesAreErrors) {
  Result<Image> none = DecodeImage(std::vector<uint8_t>{1, 2, 3, 4});
  EXPECT_EQ(none.status().message(), "not a JPEG or PNG image (4 bytes starting 01020304)");
  EXPECT_FALSE(DecodeImage(std::vector<uint8_t>{}).ok());
  for (const std::vector<uint8_t>& good : {GrayPng(40, 30), Jpeg(40, 30)}) {
    for (size_t cut : {size_t{3}, size_t{12}, good.size() / 2, good.size() - 3}) {
      std::vector<uint8_t> t(good.begin(), good.begin() + static_cast<long>(cut));
      Result<Image> r = DecodeImage(t);
      // A JPEG cut near its end may still decode (libjpeg pads the last scan): never a crash.
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << cut;
      }
    }
  }
  // Garbage after a valid signature, many times over.
  std::mt19937 rng(1);
  for (int round = 0; round < 300; ++round) {
    std::vector<uint8_t> bytes = round % 2 ? GrayPng(9, 9) : Jpeg(9, 9);
    for (int k = 0; k < 6; ++k) bytes[8 + rng() % (bytes.size() - 8)] = static_cast<uint8_t>(rng());
    Result<Image> r = DecodeImage(bytes);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

Image Gray(int64_t h, int64_t w, std::vector<uint8_t> pixels) {
  Image img;
  img.height = h;
  img.width = w;
  img.channels = 1;
  img.pixels = std::move(pixels);
  return img;
}

// Halving with Pillow's BOX filter averages pairs, rounding halves up; BILINEAR, widened by the
// scale 2, weighs (1/4, 3/4, 3/4, 1/4)-ish windows; upscaling nearest repeats pixels.
TEST(Resize, WorkedCases) {
  Result<Image> box = Resize(Gray(1, 4, {10, 21, 30, 40}), 1, 2, ResizeFilter::kArea);
  ASSERT_TRUE(box.ok());
  EXPECT_EQ(box->pixels, (std::vector<uint8_t>{16, 35}));  // 15.5 -> 16, 35
  Result<Image> nearest = Resize(Gray(1, 2, {7, 9}), 1, 4, ResizeFilter::kNearest);
  ASSERT_TRUE(nearest.ok());
  EXPECT_EQ(nearest->pixels, (std::vector<uint8_t>{7, 7, 9, 9}));
  // Bilinear 4 -> 2: support 2 around centers 1 and 3; weights over x=0..2 for the first output:
  // triangle((x + 0.5 - 1) / 2) = 0.75, 0.75, 0.25 -> normalized 3/7, 3/7, 1/7.
  Result<Image> bl = Resize(Gray(1, 4, {0, 70, 140, 210}), 1, 2, ResizeFilter::kBilinear);
  ASSERT_TRUE(bl.ok());
  EXPECT_EQ(bl->pixels[0], 50);  // (0*3 + 70*3 + 140) / 7 = 50
  // Same size: unchanged.
  const Image same = Gray(2, 2, {1, 2, 3, 4});
  EXPECT_EQ(Resize(same, 2, 2, ResizeFilter::kBicubic)->pixels, same.pixels);
  EXPECT_FALSE(Resize(same, 0, 2, ResizeFilter::kBilinear).ok());
}

TEST(CenterCrop, PythonRounding) {
  std::vector<uint8_t> p(7 * 5);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i);
  const Image img = Gray(7, 5, p);
  // top = round(5 / 2) = round(2.5) = 2, left = round(3 / 2) = round(1.5) = 2.
  Result<Image> c = CenterCrop(img, 2, 2);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->pixels, (std::vector<uint8_t>{2 * 5 + 2, 2 * 5 + 3, 3 * 5 + 2, 3 * 5 + 3}));
  EXPECT_FALSE(CenterCrop(img, 8, 2).ok());
}

TEST(ToNormalizedChw, ToTensorThenNormalize) {
  Image img;
  img.height = 1;
  img.width = 2;
  img.channels = 3;
  img.pixels = {0, 255, 51, 255, 0, 102};
  const float mean[] = {0.5f, 0.5f, 0.2f}, std[] = {0.5f, 0.25f, 0.2f};
  Result<OwnedTensor> t = ToNormalizedChw(img, mean, std);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->shape(), (Shape{3, 1, 2}));
  const float* v = t->data<const float>();
  EXPECT_FLOAT_EQ(v[0], -1.0f);  // c0, x0: (0 - 0.5) / 0.5
  EXPECT_FLOAT_EQ(v[1], 1.0f);   // c0, x1: (1 - 0.5) / 0.5
  EXPECT_FLOAT_EQ(v[2], 2.0f);   // c1, x0: (1 - 0.5) / 0.25
  EXPECT_FLOAT_EQ(v[4], (51.0f / 255.0f - 0.2f) / 0.2f);
  const float two[] = {1.0f, 2.0f};
  EXPECT_FALSE(ToNormalizedChw(img, two, two).ok());
}

}  // namespace
}  // namespace kiln
