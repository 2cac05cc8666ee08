#!/usr/bin/env bash
# Builds the Python package's wheel: dist/mme-<version>-<tags>.whl (docs/python.md).
#
#   scripts/build-wheel.sh [--preset NAME | --build-dir DIR] [--out DIR] [--no-build]
#
# Builds the Python module in build/<preset> (default release; configured first if needed),
# then packs build/<preset>/stage/python/mme, the framework libraries and the bundled models
# with python/tools/make_wheel.py (the standard library's zipfile: no PyPI, no network). The
# wheel installs offline:  python3 -m venv v && v/bin/pip install --no-index dist/mme-*.whl
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
preset=release
build_dir=""
out="$root/dist"
build=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --preset) preset="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "build-wheel: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$build_dir" ]] || build_dir="$root/build/$preset"

if [[ $build -eq 1 ]]; then
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    (cd "$root" && cmake --preset "$preset")
  fi
  cmake --build "$build_dir" --target mme_python -j "${MME_JOBS:-2}"
fi

cache="$build_dir/CMakeCache.txt"
[[ -f "$cache" ]] || { echo "build-wheel: $build_dir is not a build folder (no CMakeCache.txt)" >&2; exit 1; }
python="$(sed -n 's/^MME_PYTHON_EXECUTABLE:INTERNAL=//p' "$cache")"
if [[ -z "$python" ]]; then
  echo "build-wheel: the Python module is not configured in $build_dir (pybind11 and python3-dev are needed;" \
       "scripts/setup-deps.sh installs them)" >&2
  exit 1
fi
version="$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$cache")"
[[ -n "$version" ]] || { echo "build-wheel: no project version in $cache" >&2; exit 1; }
"$python" -B "$root/python/tools/make_wheel.py" "$build_dir/stage/python" "$out" "$version"
