#include "png.hpp"

#include <array>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace mme::test {

namespace {

// DEFLATE after Mark Adler's puff.c: canonical Huffman codes decoded bit by bit.
class Inflater {
 public:
  Inflater(const std::uint8_t* data, std::size_t size) : in_(data), size_(size) {}

  std::vector<std::uint8_t> run() {
    bool last = false;
    while (!last) {
      last = bits(1) != 0;
      switch (bits(2)) {
        case 0: stored(); break;
        case 1: fixed(); break;
        case 2: dynamic(); break;
        default: throw std::runtime_error("inflate: invalid block type");
      }
    }
    return std::move(out_);
  }

 private:
  struct Huffman {
    std::array<short, 16> count{};
    std::vector<short> symbol;
  };

  int bits(int need) {
    std::uint32_t val = bitbuf_;
    while (bitcnt_ < need) {
      if (pos_ >= size_) throw std::runtime_error("inflate: unexpected end of data");
      val |= static_cast<std::uint32_t>(in_[pos_++]) << bitcnt_;
      bitcnt_ += 8;
    }
    bitbuf_ = val >> need;
    bitcnt_ -= need;
    return static_cast<int>(val & ((1u << need) - 1));
  }

  void stored() {
    bitbuf_ = 0;
    bitcnt_ = 0;
    if (pos_ + 4 > size_) throw std::runtime_error("inflate: truncated stored block");
    const unsigned len = in_[pos_] | (in_[pos_ + 1] << 8);
    const unsigned nlen = in_[pos_ + 2] | (in_[pos_ + 3] << 8);
    pos_ += 4;
    if (len != (~nlen & 0xffffu)) throw std::runtime_error("inflate: stored block length mismatch");
    if (pos_ + len > size_) throw std::runtime_error("inflate: truncated stored block");
    out_.insert(out_.end(), in_ + pos_, in_ + pos_ + len);
    pos_ += len;
  }

  static void construct(Huffman& h, const short* length, int n) {
    h.count.fill(0);
    h.symbol.assign(static_cast<std::size_t>(n), 0);
    for (int s = 0; s < n; ++s) ++h.count[static_cast<std::size_t>(length[s])];
    std::array<short, 16> offs{};
    for (std::size_t len = 1; len < 15; ++len) offs[len + 1] = static_cast<short>(offs[len] + h.count[len]);
    for (int s = 0; s < n; ++s)
      if (length[s] != 0)
        h.symbol[static_cast<std::size_t>(offs[static_cast<std::size_t>(length[s])]++)] = static_cast<short>(s);
  }

  int decode(const Huffman& h) {
    int code = 0, first = 0, index = 0;
    for (std::size_t len = 1; len <= 15; ++len) {
      code |= bits(1);
      const int count = h.count[len];
      if (code - count < first) return h.symbol[static_cast<std::size_t>(index + (code - first))];
      index += count;
      first += count;
      first <<= 1;
      code <<= 1;
    }
    throw std::runtime_error("inflate: invalid Huffman code");
  }

  void codes(const Huffman& lencode, const Huffman& distcode) {
    static constexpr short kLenBase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                           31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
    static constexpr short kLenExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                            2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
    static constexpr short kDistBase[30] = {1,    2,    3,    4,    5,    7,    9,    13,    17,    25,
                                            33,   49,   65,   97,   129,  193,  257,  385,   513,   769,
                                            1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
    static constexpr short kDistExtra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                             6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
    for (;;) {
      int symbol = decode(lencode);
      if (symbol < 256) {
        out_.push_back(static_cast<std::uint8_t>(symbol));
      } else if (symbol == 256) {
        return;
      } else {
        symbol -= 257;
        if (symbol >= 29) throw std::runtime_error("inflate: invalid length symbol");
        const int len = kLenBase[symbol] + bits(kLenExtra[symbol]);
        const int dsym = decode(distcode);
        if (dsym < 0 || dsym >= 30) throw std::runtime_error("inflate: invalid distance symbol");
        const std::size_t dist = static_cast<std::size_t>(kDistBase[dsym] + bits(kDistExtra[dsym]));
        if (dist > out_.size()) throw std::runtime_error("inflate: distance too far back");
        for (int k = 0; k < len; ++k) out_.push_back(out_[out_.size() - dist]);
      }
    }
  }

  void fixed() {
    std::array<short, 288> lengths{};
    int s = 0;
    for (; s < 144; ++s) lengths[static_cast<std::size_t>(s)] = 8;
    for (; s < 256; ++s) lengths[static_cast<std::size_t>(s)] = 9;
    for (; s < 280; ++s) lengths[static_cast<std::size_t>(s)] = 7;
    for (; s < 288; ++s) lengths[static_cast<std::size_t>(s)] = 8;
    Huffman lencode, distcode;
    construct(lencode, lengths.data(), 288);
    std::array<short, 30> dl{};
    dl.fill(5);
    construct(distcode, dl.data(), 30);
    codes(lencode, distcode);
  }

  void dynamic() {
    static constexpr std::array<int, 19> kOrder = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    const int nlen = bits(5) + 257, ndist = bits(5) + 1, ncode = bits(4) + 4;
    if (nlen > 286 || ndist > 30) throw std::runtime_error("inflate: bad counts");
    std::array<short, 320> lengths{};
    for (int i = 0; i < ncode; ++i)
      lengths[static_cast<std::size_t>(kOrder[static_cast<std::size_t>(i)])] = static_cast<short>(bits(3));
    Huffman lencode, distcode;
    construct(lencode, lengths.data(), 19);
    int index = 0;
    while (index < nlen + ndist) {
      int symbol = decode(lencode);
      if (symbol < 16) {
        lengths[static_cast<std::size_t>(index++)] = static_cast<short>(symbol);
        continue;
      }
      short len = 0;
      if (symbol == 16) {
        if (index == 0) throw std::runtime_error("inflate: repeat with no previous length");
        len = lengths[static_cast<std::size_t>(index - 1)];
        symbol = 3 + bits(2);
      } else if (symbol == 17) {
        symbol = 3 + bits(3);
      } else {
        symbol = 11 + bits(7);
      }
      if (index + symbol > nlen + ndist) throw std::runtime_error("inflate: too many lengths");
      while (symbol--) lengths[static_cast<std::size_t>(index++)] = len;
    }
    if (lengths[256] == 0) throw std::runtime_error("inflate: no end-of-block code");
    construct(lencode, lengths.data(), nlen);
    construct(distcode, lengths.data() + nlen, ndist);
    codes(lencode, distcode);
  }

  const std::uint8_t* in_;
  std::size_t size_, pos_ = 0;
  std::uint32_t bitbuf_ = 0;
  int bitcnt_ = 0;
  std::vector<std::uint8_t> out_;
};

std::uint32_t be32(const std::uint8_t* p) {
  return (static_cast<std::uint32_t>(p[0]) << 24) | (static_cast<std::uint32_t>(p[1]) << 16) |
         (static_cast<std::uint32_t>(p[2]) << 8) | p[3];
}

int paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

}  // namespace

std::vector<std::uint8_t> inflate_raw(const std::uint8_t* data, std::size_t size) { return Inflater(data, size).run(); }

std::vector<std::uint8_t> zlib_decompress(const std::vector<std::uint8_t>& data) {
  if (data.size() < 6) throw std::runtime_error("zlib: too short");
  if ((data[0] & 0x0f) != 8 || ((data[0] << 8) | data[1]) % 31 != 0 || (data[1] & 0x20) != 0)
    throw std::runtime_error("zlib: bad header");
  return inflate_raw(data.data() + 2, data.size() - 2);
}

Image read_png(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error(file.string() + ": cannot open");
  const std::vector<std::uint8_t> d((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  static constexpr std::uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (d.size() < 8 || !std::equal(kSig, kSig + 8, d.begin())) throw std::runtime_error(file.string() + ": not a PNG");
  Image img;
  int depth = 0, colour_type = -1;
  std::vector<std::uint8_t> idat;
  for (std::size_t pos = 8; pos + 12 <= d.size();) {
    const std::uint32_t len = be32(&d[pos]);
    const std::string type(reinterpret_cast<const char*>(&d[pos + 4]), 4);
    if (pos + 12 + len > d.size()) throw std::runtime_error(file.string() + ": truncated chunk " + type);
    const std::uint8_t* body = &d[pos + 8];
    if (type == "IHDR") {
      img.width = static_cast<int>(be32(body));
      img.height = static_cast<int>(be32(body + 4));
      depth = body[8];
      colour_type = body[9];
      if (body[12] != 0) throw std::runtime_error(file.string() + ": interlaced PNG not supported");
    } else if (type == "IDAT") {
      idat.insert(idat.end(), body, body + len);
    } else if (type == "IEND") {
      break;
    }
    pos += 12 + len;
  }
  if (depth != 8) throw std::runtime_error(file.string() + ": only 8-bit PNG supported");
  int channels = 0;
  switch (colour_type) {
    case 0: channels = 1; break;
    case 2: channels = 3; break;
    case 4: channels = 2; break;
    case 6: channels = 4; break;
    default: throw std::runtime_error(file.string() + ": unsupported colour type " + std::to_string(colour_type));
  }
  if (img.width <= 0 || img.height <= 0 || img.width > 20000 || img.height > 20000)
    throw std::runtime_error(file.string() + ": bad size");
  const std::vector<std::uint8_t> raw = zlib_decompress(idat);
  const auto stride = static_cast<std::size_t>(img.width) * static_cast<std::size_t>(channels);
  const auto h = static_cast<std::size_t>(img.height);
  if (raw.size() < h * (stride + 1)) throw std::runtime_error(file.string() + ": image data too short");
  std::vector<std::uint8_t> cur(stride), prev(stride, 0);
  img.pixels.resize(static_cast<std::size_t>(img.width) * h);
  const auto bpp = static_cast<std::size_t>(channels);
  for (std::size_t y = 0; y < h; ++y) {
    const std::uint8_t filter = raw[y * (stride + 1)];
    const std::uint8_t* row = &raw[y * (stride + 1) + 1];
    for (std::size_t i = 0; i < stride; ++i) {
      const int a = i >= bpp ? cur[i - bpp] : 0, b = prev[i], c = i >= bpp ? prev[i - bpp] : 0;
      int v = row[i];
      switch (filter) {
        case 0: break;
        case 1: v += a; break;
        case 2: v += b; break;
        case 3: v += (a + b) / 2; break;
        case 4: v += paeth(a, b, c); break;
        default: throw std::runtime_error(file.string() + ": bad filter type");
      }
      cur[i] = static_cast<std::uint8_t>(v & 0xff);
    }
    for (std::size_t x = 0; x < static_cast<std::size_t>(img.width); ++x) {
      const std::uint8_t* px = &cur[x * bpp];
      img.pixels[y * static_cast<std::size_t>(img.width) + x] =
          channels >= 3 ? Rgb{px[0], px[1], px[2]} : Rgb{px[0], px[0], px[0]};
    }
    std::swap(cur, prev);
  }
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
