// A small PNG reader for the screenshot checks: 8-bit greyscale, grey + alpha, RGB and RGBA,
// not interlaced (what Chromium writes), with its own inflate so the tests need no library.
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

// Throws std::runtime_error saying what is wrong with the file.
Image read_png(const std::filesystem::path& file);
// The raw DEFLATE decoder (RFC 1951) and the zlib wrapper (RFC 1950) around it.
std::vector<std::uint8_t> inflate_raw(const std::uint8_t* data, std::size_t size);
std::vector<std::uint8_t> zlib_decompress(const std::vector<std::uint8_t>& data);

Rgb parse_hex_colour(const std::string& hex);  // "#5f87d7"
// Pixels within `tolerance` of `colour` on every channel.
std::size_t count_near(const Image& image, Rgb colour, int tolerance);

}  // namespace mme::test
