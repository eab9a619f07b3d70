// The scaling chart as PNG bytes: an RGB raster we draw, encoded by libpng.
#include "plan/png_plot.hpp"

#include <png.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace trident::plan {
namespace {

using Rgb = std::array<uint8_t, 3>;

struct Image {
  int width, height;
  std::vector<uint8_t> rgb;  // (height, width, 3)
  Image(int w, int h) : width(w), height(h), rgb(size_t(w) * h * 3, 255) {}
  void set(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= width || y >= height) return;
    std::copy(c.begin(), c.end(), rgb.begin() + (size_t(y) * width + x) * 3);
  }
  void line(int x0, int y0, int x1, int y1, Rgb c) {  // Bresenham
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    for (int err = dx + dy;; ) {
      set(x0, y0, c);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) err += dy, x0 += sx;
      if (e2 <= dx) err += dx, y0 += sy;
    }
  }
  void dot(int x, int y, int r, Rgb c) {
    for (int i = -r; i <= r; ++i)
      for (int j = -r; j <= r; ++j)
        if (i * i + j * j <= r * r) set(x + i, y + j, c);
  }
  // Digits, '.', 'k', 'M', 'G' in a 3x5 font, scaled 2x.
  void text(int x, int y, const std::string& s, Rgb c) {
    static const std::string glyphs = " 0:111101101101111 1:010110010010111 2:111001111100111 3:111001111001111 "
                                "4:101101111001001 5:111100111001111 6:111100111101111 7:111001001001001 "
                                "8:111101111101111 9:111101111001111 .:000000000000010 k:100101110101101 "
                                "M:101111111101101 G:111100101101111 ";
    for (char ch : s) {
      const size_t at = glyphs.find(std::string{' ', ch, ':'});  // " 1:" — never inside a glyph's bits
      if (at != std::string::npos)
        for (int bit = 0; bit < 15; ++bit)
          if (glyphs[at + 3 + bit] == '1')
            for (int q = 0; q < 4; ++q) set(x + (bit % 3) * 2 + q % 2, y + (bit / 3) * 2 + q / 2, c);
      x += 8;
    }
  }
};

// libpng's output callback: the bytes appended to the std::string behind the write struct.
void append_bytes(png_structp png, png_bytep data, png_size_t length) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), length);
}

// The image as a PNG file (8-bit RGB, libpng's default compression). libpng reports errors by
// longjmp; for an image we drew ourselves in memory only running out of memory can raise one.
std::string encode(const Image& img) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw std::runtime_error("libpng could not encode the " + std::to_string(img.width) + "x" +
                             std::to_string(img.height) + " plot");
  }
  png_set_write_fn(png, &out, append_bytes, nullptr);
  png_set_IHDR(png, info, img.width, img.height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < img.height; ++y)
    png_write_row(png, const_cast<png_bytep>(img.rgb.data() + size_t(y) * img.width * 3));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

std::string short_number(double v) {
  const char* units[] = {"", "k", "M", "G"};
  int u = 0;
  while (v >= 1000 && u < 3) v /= 1000, ++u;
  char text[32];
  std::snprintf(text, sizeof text, v < 10 && v != std::floor(v) ? "%.1f%s" : "%.0f%s", v, units[u]);
  return text;
}

}  // namespace

std::string scaling_plot_png(const std::vector<PlotPoint>& points, int width, int height) {
  Image img(width, height);
  const int left = 70, right = width - 20, top = 20, bottom = height - 40;
  double x_lo = 1e300, x_hi = 0, y_hi = 0;
  for (const PlotPoint& p : points) {
    x_lo = std::min(x_lo, std::log2(p.devices)), x_hi = std::max(x_hi, std::log2(p.devices));
    y_hi = std::max(y_hi, p.throughput);
  }
  if (x_hi <= x_lo) x_hi = x_lo + 1;
  if (y_hi <= 0) y_hi = 1;
  auto px = [&](double devices) { return left + int((std::log2(devices) - x_lo) / (x_hi - x_lo) * (right - left)); };
  auto py = [&](double y) { return bottom - int(y / (1.1 * y_hi) * (bottom - top)); };
  const Rgb black{0, 0, 0}, grey{200, 200, 200}, blue{30, 90, 200}, red{220, 30, 30};
  img.line(left, bottom, right, bottom, black);
  img.line(left, top, left, bottom, black);
  for (int k = 1; k <= 4; ++k) {  // horizontal grid and y labels
    const double y = 1.1 * y_hi * k / 4;
    img.line(left + 1, py(y), right, py(y), grey);
    img.text(4, py(y) - 5, short_number(y), black);
  }
  const PlotPoint* previous = nullptr;
  for (const PlotPoint& p : points) {
    img.line(px(p.devices), bottom, px(p.devices), bottom + 5, black);
    img.text(px(p.devices) - 8, bottom + 10, short_number(p.devices), black);
    if (p.throughput <= 0) continue;
    if (previous) img.line(px(previous->devices), py(previous->throughput), px(p.devices), py(p.throughput), blue);
    img.dot(px(p.devices), py(p.throughput), p.negative ? 5 : 3, p.negative ? red : blue);
    previous = &p;
  }
  return encode(img);
}

}  // namespace trident::plan
