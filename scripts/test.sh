#!/usr/bin/env bash
# Builds mme from scratch if needed and runs every test (the README's test command).
#   scripts/test.sh            release build, all tests
#   scripts/test.sh asan       AddressSanitizer + UBSan build, all tests
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
scripts/setup-deps.sh
cmake --preset "$preset"
cmake --build --preset "$preset"
ctest --preset "$preset" --no-tests=error -j "$(nproc)"
