// SPDX-License-Identifier: Apache-2.0
// JPEG and PNG decoding. Both libraries report errors by longjmp: each decoder below keeps the
// code between its setjmp and the library calls free of C++ objects (plain pointers and a
// malloc'd pixel buffer held in a struct outside that frame), so the jump skips no destructor.

#include <fmt/format.h>
#include <jpeglib.h>
#include <png.h>

#include <csetjmp>
#include <cstdlib>
#include <cstring>

#include "image/image.h"

namespace kiln {
namespace {

// What a decoder fills in, outside the frame that calls setjmp.
struct Decoded {
  uint8_t* pixels = nullptr;  // malloc'd, height * width * channels
  int64_t height = 0, width = 0, channels = 0;
  bool too_large = false;
  char message[JMSG_LENGTH_MAX > 200 ? JMSG_LENGTH_MAX : 200] = {};
};

// ---- JPEG ---------------------------------------------------------------------------------

struct JpegErrors {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  Decoded* out;
};

void JpegErrorExit(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->out->message);
  std::longjmp(e->jump, 1);
}
void JpegQuiet(j_common_ptr, int) {}  // warnings (a few bytes of junk) are not errors

// Returns false with out->message set on error (out->pixels freed).
bool DecodeJpeg(const uint8_t* data, size_t size, int64_t max_pixels, Decoded* out) {
  jpeg_decompress_struct cinfo;
  JpegErrors errors;
  errors.out = out;
  cinfo.err = jpeg_std_error(&errors.pub);
  errors.pub.error_exit = JpegErrorExit;
  errors.pub.emit_message = JpegQuiet;
  if (setjmp(errors.jump) != 0) {
    jpeg_destroy_decompress(&cinfo);
    std::free(out->pixels);
    out->pixels = nullptr;
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (static_cast<int64_t>(cinfo.image_width) * cinfo.image_height > max_pixels) {
    out->width = cinfo.image_width;
    out->height = cinfo.image_height;
    out->too_large = true;
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    std::snprintf(out->message, sizeof(out->message), "CMYK JPEG images are not supported");
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  const bool gray = cinfo.jpeg_color_space == JCS_GRAYSCALE;
  cinfo.out_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;  // Pillow: mode L or RGB
  jpeg_start_decompress(&cinfo);
  out->width = cinfo.output_width;
  out->height = cinfo.output_height;
  out->channels = cinfo.output_components;
  const size_t row = static_cast<size_t>(out->width * out->channels);
  out->pixels = static_cast<uint8_t*>(std::malloc(row * static_cast<size_t>(out->height)));
  if (out->pixels == nullptr) {
    std::snprintf(out->message, sizeof(out->message), "out of memory");
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW rows[1] = {out->pixels + row * cinfo.output_scanline};
    jpeg_read_scanlines(&cinfo, rows, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

// ---- PNG ----------------------------------------------------------------------------------

struct PngSource {
  const uint8_t* data;
  size_t size;
  size_t pos;
  Decoded* out;
  png_bytepp rows;  // malloc'd row pointers (here, not in the setjmp frame)
};

void PngRead(png_structp png, png_bytep dst, png_size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->pos) png_error(png, "the file is truncated");
  std::memcpy(dst, src->data + src->pos, n);
  src->pos += n;
}
void PngError(png_structp png, png_const_charp message) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->out->message, sizeof(src->out->message), "%s", message);
  png_longjmp(png, 1);
}
void PngWarning(png_structp, png_const_charp) {}

bool DecodePng(const uint8_t* data, size_t size, int64_t max_pixels, Decoded* out) {
  PngSource src{data, size, 0, out, nullptr};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, PngError, PngWarning);
  if (png == nullptr) {
    std::snprintf(out->message, sizeof(out->message), "cannot start libpng");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(out->message, sizeof(out->message), "cannot start libpng");
    return false;
  }
  if (setjmp(png_jmpbuf(png)) != 0) {
    png_destroy_read_struct(&png, &info, nullptr);
    std::free(src.rows);
    std::free(out->pixels);
    out->pixels = nullptr;
    return false;
  }
  png_set_read_fn(png, &src, PngRead);
  // The decompressed size is bounded by the pixel limit below; also bound the chunk cache.
  png_set_chunk_malloc_max(png, 64u << 20);
  png_read_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info);
  const png_uint_32 height = png_get_image_height(png, info);
  if (static_cast<int64_t>(width) * height > max_pixels) {
    out->width = width;
    out->height = height;
    out->too_large = true;
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  const int color = png_get_color_type(png, info);
  png_set_strip_16(png);  // the high byte of 16-bit samples
  png_set_packing(png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY) png_set_expand_gray_1_2_4_to_8(png);
  png_set_strip_alpha(png);  // Pillow's convert drops alpha; tRNS is never expanded
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  out->width = width;
  out->height = height;
  out->channels = png_get_channels(png, info);
  const size_t row = png_get_rowbytes(png, info);
  if (row != static_cast<size_t>(out->width * out->channels)) {
    png_error(png, "unexpected row layout");
  }
  out->pixels = static_cast<uint8_t*>(std::malloc(row * height + 1));
  src.rows = static_cast<png_bytepp>(std::malloc(sizeof(png_bytep) * (height + 1)));
  if (out->pixels == nullptr || src.rows == nullptr) png_error(png, "out of memory");
  for (png_uint_32 y = 0; y < height; ++y) src.rows[y] = out->pixels + row * y;
  png_read_image(png, src.rows);
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  std::free(src.rows);
  return true;
}

}  // namespace

std::string_view ImageFormat(std::span<const uint8_t> bytes) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return "png";
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) return "jpeg";
  return "";
}

Result<Image> DecodeImage(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  const std::string_view format = ImageFormat(bytes);
  if (format.empty()) {
    std::string head;
    for (size_t i = 0; i < bytes.size() && i < 8; ++i) head += fmt::format("{:02x}", bytes[i]);
    return Status::InvalidArgument(fmt::format("not a JPEG or PNG image ({} bytes starting {})",
                                               bytes.size(), head.empty() ? "-" : head));
  }
  Decoded d;
  const bool ok = format == "png" ? DecodePng(bytes.data(), bytes.size(), options.max_pixels, &d)
                                  : DecodeJpeg(bytes.data(), bytes.size(), options.max_pixels, &d);
  if (!ok) {
    if (d.too_large) {
      return Status::InvalidArgument(
          fmt::format("{} image of {} x {} pixels is over the limit of {} pixels",
                      format == "png" ? "PNG" : "JPEG", d.width, d.height, options.max_pixels));
    }
    return Status::InvalidArgument(
        fmt::format("corrupt {} image: {}", format == "png" ? "PNG" : "JPEG", d.message));
  }
  Image img;
  img.height = d.height;
  img.width = d.width;
  const int64_t n = d.height * d.width;
  if (options.color == ColorMode::kRgb) {
    img.channels = 3;
    img.pixels.resize(static_cast<size_t>(n * 3));
    if (d.channels == 3) {
      std::memcpy(img.pixels.data(), d.pixels, static_cast<size_t>(n * 3));
    } else {
      for (int64_t i = 0; i < n; ++i) {
        img.pixels[3 * i] = img.pixels[3 * i + 1] = img.pixels[3 * i + 2] = d.pixels[i];
      }
    }
  } else {
    img.channels = 1;
    img.pixels.resize(static_cast<size_t>(n));
    if (d.channels == 1) {
      std::memcpy(img.pixels.data(), d.pixels, static_cast<size_t>(n));
    } else {
      for (int64_t i = 0; i < n; ++i) {
        const uint8_t* p = d.pixels + 3 * i;
        img.pixels[i] =
            static_cast<uint8_t>((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16);
      }
    }
  }
  std::free(d.pixels);
  return img;
}

}  // namespace kiln
