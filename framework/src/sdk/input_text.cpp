#include "mme/sdk/input_text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

namespace fs = std::filesystem;

namespace mme {

bool json_nests_deeper(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

void check_json_nesting(std::string_view text, const std::string& source, std::string_view what) {
  if (json_nests_deeper(text, kMaxNestingDepth))
    throw ConfigError(
        fmt::format("{}: JSON nested more than {} levels deep; {} nests a few", source, kMaxNestingDepth, what));
}

std::ifstream open_text_file(const fs::path& path, std::uintmax_t max_bytes, std::string_view what) {
  const std::string name = printable(path.string());
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw NotFoundError(fmt::format("{}: no such file", name));
  if (fs::is_directory(st)) throw NotFoundError(fmt::format("{}: is a folder, not {}", name, what));
  if (!fs::is_regular_file(st))
    throw NotFoundError(
        fmt::format("{}: not a regular file (a device, FIFO or socket); {} is read from a file", name, what));
  const auto size = fs::file_size(path, ec);
  if (!ec && size > max_bytes)
    throw ConfigError(fmt::format("{}: {} bytes is more than the {} bytes {} may have", name, size, max_bytes, what));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NotFoundError(fmt::format("{}: cannot open the file: {}", name, std::strerror(errno)));
  return in;
}

std::string read_text_file(const fs::path& path, std::uintmax_t max_bytes, std::string_view what) {
  std::ifstream in = open_text_file(path, max_bytes, what);
  const std::string name = printable(path.string());
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  std::string text;
  text.reserve(static_cast<std::size_t>(ec ? 0 : std::min(size, max_bytes)));
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes)  // it grew while it was read
      throw ConfigError(fmt::format("{}: more than the {} bytes {} may have", name, max_bytes, what));
  }
  return text;
}

namespace {
// The second and third bytes of a UTF-8 bidi control after its 0xE2: the embeddings and
// overrides U+202A-U+202E (LRE, RLE, PDF, LRO, RLO) and the isolates U+2066-U+2069 (LRI, RLI,
// FSI, PDI), which make a terminal show the rest of a line in another order ("Trojan Source").
bool is_bidi_control(unsigned char b1, unsigned char b2) {
  return (b1 == 0x80 && b2 >= 0xaa && b2 <= 0xae) || (b1 == 0x81 && b2 >= 0xa6 && b2 <= 0xa9);
}
}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  int continuation = 0;  // UTF-8 continuation bytes still expected after a lead byte
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (continuation > 0 && c >= 0x80 && c <= 0xbf) {
      --continuation;
      out.push_back(static_cast<char>(c));
      continue;
    }
    continuation = 0;
    if (c == '\t' || c == '\n' || c == '\r') {
      out.push_back(' ');
    } else if (c < 0x20 || c == 0x7f) {
      out.push_back('?');
    } else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9f &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80) {
      out.push_back('?');  // a C1 control as UTF-8 (U+009B is CSI)
      ++i;
    } else if (c >= 0x80 && c <= 0x9f) {
      out.push_back('?');  // a lone C1 byte: a control to a terminal in an 8-bit mode
    } else if (c == 0xe2 && i + 2 < text.size() &&
               is_bidi_control(static_cast<unsigned char>(text[i + 1]), static_cast<unsigned char>(text[i + 2]))) {
      out.push_back('?');  // a bidi control: it would reorder the rest of the line on screen
      i += 2;
    } else {
      if (c >= 0xc0) continuation = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string excerpt(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xc0) == 0x80) --n;  // not inside a sequence
  return std::string(text.substr(0, n)) + "...";
}

std::string shell_quote(std::string_view word) {
  constexpr std::string_view kPlain = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,+-";
  if (!word.empty() && word.front() != '=' && word.find_first_not_of(kPlain) == std::string_view::npos)
    return std::string(word);
  std::string out = "'";
  for (const char c : word) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string shell_command(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += shell_quote(w);
  }
  return out;
}

}  // namespace mme
