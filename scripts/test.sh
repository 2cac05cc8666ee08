#!/usr/bin/env bash
# Builds mme from scratch if needed and runs every test (the README's test command).
#   scripts/test.sh            release build, all tests
#   scripts/test.sh asan       AddressSanitizer + UBSan build, all tests
# MME_WERROR=ON (as .ci/run sets it) builds with warnings as errors.
# MME_WEB=ON also installs emscripten, Chromium and npm (scripts/setup-deps.sh --web), so the
# browser page is built and tested (docs/web.md); .ci/run sets it for the release run, with
# MME_REQUIRE_WEB=1 (the page test then fails, not skips, without emscripten or Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
# Chromium: the render test of the pictures (tests/pictures) screenshots them headless, and
# fails without it.
if [[ "${MME_WEB:-}" == "ON" ]]; then
  scripts/setup-deps.sh --web --with chromium
else
  scripts/setup-deps.sh --with chromium
fi
cmake --preset "$preset" ${MME_WERROR:+"-DMME_WERROR=$MME_WERROR"}
cmake --build --preset "$preset"
ctest --preset "$preset" --no-tests=error -j "$(nproc)"
