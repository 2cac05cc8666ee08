#!/usr/bin/env python3
"""Packs the staged Python package (build/<preset>/stage/python/mme) into a wheel with the
standard library only (zipfile, hashlib): no setuptools, wheel or build module, no network.

    make_wheel.py STAGE_PYTHON_DIR OUT_DIR VERSION

Links in the staged folder (the framework libraries, the bundled models) are followed, so the
wheel holds real files. The tags are the running interpreter's (cp311-cp311-linux_x86_64): the
extension is built for it and links Debian's shared libraries (boost program_options, spdlog,
fmt, yaml-cpp, re2), hence a plain linux_* platform tag, not manylinux. Prints the wheel's path.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import sysconfig
import zipfile

# Files that do not belong in the wheel.
SKIP_DIRS = {"__pycache__"}
SKIP_SUFFIXES = (".pyc", ".tmp")


def tags() -> str:
    impl = sys.implementation.name
    if impl != "cpython":
        raise SystemExit(f"make_wheel: CPython only (this is {impl})")
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{py}-{py}-{platform}"


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def package_files(package_dir: str) -> list[tuple[str, str]]:
    """(path in the wheel, file on disk), sorted, links followed."""
    out = []
    for root, dirs, files in os.walk(package_dir, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(SKIP_SUFFIXES):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, os.path.dirname(package_dir)).replace(os.sep, "/")
            out.append((rel, path))
    return out


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    stage, out_dir, version = sys.argv[1:4]
    package_dir = os.path.join(stage, "mme")
    ext = sysconfig.get_config_var("EXT_SUFFIX")
    if not os.path.isfile(os.path.join(package_dir, "_core" + ext)):
        raise SystemExit(f"make_wheel: {package_dir} has no _core{ext}: build the Python module first "
                         f"(cmake --build build/<preset> --target mme_python)")
    tag = tags()
    dist_info = f"mme-{version}.dist-info"
    metadata = (
        "Metadata-Version: 2.1\n"
        "Name: mme\n"
        f"Version: {version}\n"
        "Summary: Per-GPU memory estimates for Megatron-LM training (megatron-memory-estimator)\n"
        "License: see the project\n"
        f"Requires-Python: =={sys.version_info.major}.{sys.version_info.minor}.*\n"
        "Description-Content-Type: text/plain\n\n"
        "The Python module of megatron-memory-estimator: mme.estimate(), mme.plan(), mme.params(),\n"
        "mme.models(), mme.hardware(), mme.validate(), mme.preflight(). Built for Debian 12; needs\n"
        "its shared libraries libboost-program-options1.81.0, libspdlog1.10, libfmt9, libre2-9 and\n"
        "libyaml-cpp0.7 (docs/python.md).\n")
    wheel = ("Wheel-Version: 1.0\n"
             "Generator: mme python/tools/make_wheel.py\n"
             "Root-Is-Purelib: false\n"
             f"Tag: {tag}\n")
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, f"mme-{version}-{tag}.whl")
    records = []
    tmp = target + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        def add(name: str, data: bytes, executable: bool = False) -> None:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # reproducible
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o755 if executable else 0o644) << 16
            z.writestr(info, data)
            records.append(f"{name},{record_hash(data)},{len(data)}")

        for name, path in package_files(package_dir):
            with open(path, "rb") as f:
                data = f.read()
            add(name, data, executable=name.endswith(".so") or ".so." in name)
        add(f"{dist_info}/METADATA", metadata.encode())
        add(f"{dist_info}/WHEEL", wheel.encode())
        add(f"{dist_info}/top_level.txt", b"mme\n")
        record_name = f"{dist_info}/RECORD"
        records.append(f"{record_name},,")
        info = zipfile.ZipInfo(record_name, date_time=(2020, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        z.writestr(info, "\n".join(records) + "\n")
    os.replace(tmp, target)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
