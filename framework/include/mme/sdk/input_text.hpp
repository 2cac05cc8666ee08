// Rules every input shares (docs/reliability.md): how deep a JSON or YAML document may nest,
// which files are read and how large they may be, and how a string from input is made safe to
// print on a terminal.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace mme {

// The one nesting limit of every JSON and YAML input (config.json, downloaded configs, spec
// files, hardware profiles): values are walked and dumped recursively, so a document nested
// thousands of levels deep would exhaust the stack. Real documents nest a few levels.
inline constexpr int kMaxNestingDepth = 64;

// Whether the brackets of JSON `text` (outside strings) nest deeper than `max_depth`: a scan that
// needs no parse (and so no stack), for a check before parsing.
bool json_nests_deeper(std::string_view text, int max_depth);

// ConfigError "<source>: JSON nested more than 64 levels deep; <what> nests a few" when the
// brackets of `text` (outside strings) nest deeper than kMaxNestingDepth. Checked before parsing.
void check_json_nesting(std::string_view text, const std::string& source, std::string_view what = "a config.json");

// The bytes of a regular file of at most `max_bytes`, read with one clear error otherwise:
// NotFoundError for a missing file, a folder or another kind of file (a device, a FIFO), or a
// file that cannot be opened; ConfigError for a file larger than `max_bytes` (also one that
// grows while it is read). `what` names the kind of file in the messages ("a CSV of cases").
std::string read_text_file(const std::filesystem::path& path, std::uintmax_t max_bytes, std::string_view what);
// The same checks, the file opened to be read as a stream (a training log is never held whole);
// the reader checks that it does not grow beyond `max_bytes`.
std::ifstream open_text_file(const std::filesystem::path& path, std::uintmax_t max_bytes, std::string_view what);

// `text` with every control character replaced, so a string from input (a hub repository's
// model_type, a GPU name from a hardware file) cannot write escape sequences to a terminal:
// C0 controls and DEL become '?' (tab, newline and carriage return a space), C1 controls
// (U+0080 to U+009F, as UTF-8 or as single bytes) and the Unicode bidi controls (U+202A to
// U+202E, U+2066 to U+2069: they reorder what follows on the line) '?'. Other bytes, UTF-8
// included, are kept.
std::string printable(std::string_view text);

// `text` cut to its first `max_bytes` bytes (no UTF-8 sequence split) and "..." when longer: for
// quoting input of any length in a message.
std::string excerpt(std::string_view text, std::size_t max_bytes = 60);

// `word` as one word of a POSIX shell command line that the user may paste: unchanged when it
// holds only characters no shell treats specially (letters, digits and _ . / : = , + -, not
// starting with '='), otherwise in single quotes, a ' inside written '\''. An empty word is ''.
// A GPU name from a hardware file such as `Acme $(touch x)` stays one inert word.
std::string shell_quote(std::string_view word);
// The words quoted one by one (shell_quote), joined by single spaces: a printed command line.
std::string shell_command(const std::vector<std::string>& words);

}  // namespace mme
