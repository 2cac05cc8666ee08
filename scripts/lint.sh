#!/usr/bin/env bash
# The tree's own lint (docs/architecture.md, "Tests"):
#   scripts/lint.sh            clang-format check of every C++ file (.clang-format); CTest runs
#                              this as framework.format on every build
#   scripts/lint.sh --tidy     and clang-tidy (.clang-tidy) over every source, with the
#                              compile commands of build/release (slow: about a minute per ten
#                              files on 2 cores)
#   scripts/lint.sh --fix      rewrite the files in clang-format's layout instead of checking
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-check}"
format="$(command -v clang-format-14 || command -v clang-format || true)"
if [ -z "$format" ]; then
  echo "lint: clang-format not found (scripts/setup-deps.sh installs clang-format-14)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' | grep -v '^fuzz/corpus/')
if [ "$mode" = "--fix" ]; then
  "$format" -i "${files[@]}"
  exit 0
fi
"$format" --dry-run --Werror "${files[@]}"
if [ "$mode" = "--tidy" ]; then
  tidy="$(command -v clang-tidy-14 || command -v clang-tidy)"
  db="build/release/compile_commands.json"
  [ -f "$db" ] || { echo "lint: $db is missing: cmake --preset release first" >&2; exit 2; }
  # clang does not know g++'s -fno-gnu-unique: a copy of the database without it.
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  sed 's/ -fno-gnu-unique//g' "$db" > "$tmp/compile_commands.json"
  mapfile -t sources < <(git ls-files 'framework/*.cpp' 'plugins/*.cpp' 'cli/*.cpp')
  "$tidy" -p "$tmp" --quiet "${sources[@]}"
fi
