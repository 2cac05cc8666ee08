// The screenshots' pixels, read with libpng's simplified API (libpng-dev): any PNG Chromium
// writes (grey, RGB, with or without alpha, interlaced or not) as 8-bit RGB.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace mme::test {

struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb&) const = default;
};

struct Image {
  int width = 0, height = 0;
  std::vector<Rgb> pixels;  // row by row; alpha dropped (composited on nothing)
  const Rgb& at(int x, int y) const {
    return pixels[static_cast<std::size_t>(y) * static_cast<std::size_t>(width) + static_cast<std::size_t>(x)];
  }
};

// Throws std::runtime_error saying what is wrong with the file (libpng's message).
Image read_png(const std::filesystem::path& file);

Rgb parse_hex_colour(const std::string& hex);  // "#5f87d7"
// Pixels within `tolerance` of `colour` on every channel.
std::size_t count_near(const Image& image, Rgb colour, int tolerance);

}  // namespace mme::test
