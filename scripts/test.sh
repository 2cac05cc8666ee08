#!/usr/bin/env bash
# Builds mme from scratch if needed and runs every test (the README's test command).
#   scripts/test.sh            release build, all tests
#   scripts/test.sh asan       AddressSanitizer + UBSan build, all tests
# MME_WERROR=ON (as .ci/run sets it) builds with warnings as errors.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
# Chromium: the render test of the pictures (tests/pictures) screenshots them headless, and
# fails without it.
scripts/setup-deps.sh --with chromium
cmake --preset "$preset" ${MME_WERROR:+"-DMME_WERROR=$MME_WERROR"}
cmake --build --preset "$preset"
ctest --preset "$preset" --no-tests=error -j "$(nproc)"
