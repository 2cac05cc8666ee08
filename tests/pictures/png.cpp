#include "png.hpp"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <png.h>

namespace mme::test {

Image read_png(const std::filesystem::path& file) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  auto fail = [&](const char* what) {
    const std::string message = file.string() + ": " + what + ": " + png.message;
    png_image_free(&png);
    return std::runtime_error(message);
  };
  if (!png_image_begin_read_from_file(&png, file.c_str())) throw fail("not a readable PNG");
  if (png.width == 0 || png.height == 0 || png.width > 20000 || png.height > 20000) throw fail("bad size");
  // RGBA, so the alpha channel is read and dropped rather than composited onto a background.
  png.format = PNG_FORMAT_RGBA;
  std::vector<std::uint8_t> rgba(PNG_IMAGE_SIZE(png));
  if (!png_image_finish_read(&png, nullptr, rgba.data(), 0, nullptr)) throw fail("broken image data");
  Image img;
  img.width = static_cast<int>(png.width);
  img.height = static_cast<int>(png.height);
  img.pixels.resize(rgba.size() / 4);
  for (std::size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = {rgba[4 * i], rgba[4 * i + 1], rgba[4 * i + 2]};
  return img;
}

Rgb parse_hex_colour(const std::string& hex) {
  if (hex.size() != 7 || hex[0] != '#') throw std::runtime_error("bad colour " + hex);
  const auto v = std::stoul(hex.substr(1), nullptr, 16);
  return {static_cast<std::uint8_t>(v >> 16), static_cast<std::uint8_t>((v >> 8) & 0xff),
          static_cast<std::uint8_t>(v & 0xff)};
}

std::size_t count_near(const Image& image, Rgb colour, int tolerance) {
  std::size_t n = 0;
  for (const auto& p : image.pixels)
    if (std::abs(p.r - colour.r) <= tolerance && std::abs(p.g - colour.g) <= tolerance &&
        std::abs(p.b - colour.b) <= tolerance)
      ++n;
  return n;
}

}  // namespace mme::test
