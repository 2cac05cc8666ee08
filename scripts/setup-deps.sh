#!/usr/bin/env bash
# Installs everything mme needs to build and test on Debian 12 (bookworm). Idempotent: a
# package already installed is left alone. Run as root (or with sudo available).
set -euo pipefail

packages=(
  cmake ninja-build g++ make pkg-config ca-certificates
  libboost1.81-dev libboost-program-options1.81-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcurl4-openssl-dev
  libyaml-cpp-dev  # spec files (mme estimate --config)
  libre2-dev  # the row filters of mme validate (linear-time regular expressions)
  libpng-dev  # tests/pictures: the screenshots of the HTML and SVG pictures
  dpkg-dev file  # cpack -G DEB: dpkg-shlibdeps computes the package dependencies
  clang-format-14 git  # scripts/lint.sh: the layout check CTest runs (framework.format)
  python3 python3-jsonschema python3-yaml  # tests/contracts: the JSON Schemas against real outputs
  groff-base man-db zsh fish  # tests/cli and tests/install: man pages formatted, zsh/fish completion parsed
  python3-dev python3-pybind11 python3-pytest python3-venv  # the Python module and its tests (docs/python.md)
  locales  # localedef's charmaps: the locale tests build a comma-decimal locale (tests/reliability/locale_test.cpp)
)
# The browser page and its test (docs/web.md), only when asked for: `scripts/setup-deps.sh --web`.
# emscripten builds web/; Chromium and npm (for puppeteer-core) run tests/web. A Node.js that
# brings its own npm (NodeSource) is kept: Debian's npm would replace it.
if [[ "${1:-}" == "--web" ]]; then
  shift
  packages+=(emscripten chromium)
  command -v npm >/dev/null || packages+=(npm)
fi
# Extra tools, asked for by name: `scripts/setup-deps.sh --with hyperfine clang ...`.
if [[ "${1:-}" == "--with" ]]; then
  shift
  packages+=("$@")
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup-deps: all ${#packages[@]} packages are installed"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup-deps: run as root (missing: ${missing[*]})" >&2; exit 1; }
  SUDO=sudo
fi
echo "setup-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
