"""scripts/build-wheel.sh packs the staged package into a wheel that installs offline into a
fresh venv (python3 -m venv, pip install --no-index) and works there, outside the build tree."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sysconfig
import zipfile

import pytest

from conftest import PLUGIN_DIR, PYTHON, SOURCE_DIR, run_cli

BUILD_DIR = os.environ.get("MME_TEST_BUILD_DIR", "")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("dist")
    p = subprocess.run([os.path.join(SOURCE_DIR, "scripts", "build-wheel.sh"), "--build-dir", BUILD_DIR, "--out",
                        str(out), "--no-build"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    path = p.stdout.strip().splitlines()[-1]
    assert os.path.dirname(path) == str(out)
    return path


def test_wheel_name_and_contents(wheel):
    version = run_cli("version").out.split()[1]
    name = os.path.basename(wheel)
    assert re.fullmatch(rf"mme-{re.escape(version)}-cp3\d+-cp3\d+-linux_x86_64\.whl", name), name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        ext = "mme/_core" + sysconfig.get_config_var("EXT_SUFFIX")
        for required in ("mme/__init__.py", "mme/__init__.pyi", "mme/py.typed", ext, "mme/libmme_sdk.so.0.1",
                         "mme/models/deepseek-ai--DeepSeek-V3/config.json", f"mme-{version}.dist-info/METADATA",
                         f"mme-{version}.dist-info/WHEEL", f"mme-{version}.dist-info/RECORD"):
            assert required in names, required
        assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
        wheel_meta = z.read(f"mme-{version}.dist-info/WHEEL").decode()
        assert "Root-Is-Purelib: false" in wheel_meta and name[len(f"mme-{version}-"):-4] in wheel_meta
        # RECORD: every file once, with its sha256 and size.
        rows = list(csv.reader(io.StringIO(z.read(f"mme-{version}.dist-info/RECORD").decode())))
        recorded = {r[0]: r for r in rows}
        assert set(recorded) == set(names)
        for n in names:
            if n.endswith("RECORD"):
                continue
            data = z.read(n)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert recorded[n][1] == f"sha256={digest}" and recorded[n][2] == str(len(data)), n
        # No link: real files (zip entries with the symlink mode would break pip's install).
        for info in z.infolist():
            assert (info.external_attr >> 16) & 0o170000 in (0, 0o100000), info.filename
        # The extension finds the framework libraries beside it.
        if shutil.which("readelf"):
            tmp = os.path.join(os.path.dirname(wheel), "core.so")
            with open(tmp, "wb") as f:
                f.write(z.read(ext))
            dyn = subprocess.run(["readelf", "-d", tmp], capture_output=True, text=True, check=True).stdout
            assert "(RUNPATH)" in dyn and "[$ORIGIN]" in dyn, dyn


CHECK = r"""
import json, os, sys, mme
r = mme.estimate("deepseek-ai/DeepSeek-V3", tp=4, pp=4, ep=8, num_gpus=128, num_layers_in_last_pipeline_stage=16)
hw = [h.name for h in mme.hardware(plugin_dirs=[sys.argv[1]])]
maps = open("/proc/self/maps").read()
sdk = sorted({line.split()[-1] for line in maps.splitlines() if "libmme_sdk" in line})
print(json.dumps({"file": mme.__file__, "doc": r.to_dict(), "models": len(mme.models()), "hardware": hw, "sdk": sdk}))
"""


def test_wheel_installs_offline_into_a_fresh_venv(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([PYTHON, "-m", "venv", str(venv)], check=True, capture_output=True)
    py = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-cache-dir", "--disable-pip-version-check",
                        wheel], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    # Run from a folder outside the build tree, without PYTHONPATH: the installed package.
    work = tmp_path / "elsewhere"
    work.mkdir()
    p = subprocess.run([py, "-c", CHECK, PLUGIN_DIR], capture_output=True, text=True, env=env, cwd=work)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    site = os.path.join(str(venv), "lib")
    assert got["file"].startswith(site)
    expected = run_cli("estimate", "deepseek-ai/DeepSeek-V3", "--tp", "4", "--pp", "4", "--ep", "8", "--num-gpus",
                       "128", "--num-layers-in-last-pipeline-stage", "16", "--json").json()
    # The same document, but for where the bundled config was read: the package's own copy.
    source = got["doc"]["model"].pop("source")
    assert source.startswith(site) and source.endswith("deepseek-ai--DeepSeek-V3/config.json")
    expected["model"].pop("source")
    assert got["doc"] == expected
    assert got["models"] == len(run_cli("models", "--json").json()["models"])
    # An out-of-tree plugin binds to the package's libmme_sdk: one copy in the process.
    assert "PyTest-GPU-48GB" in got["hardware"]
    assert len(got["sdk"]) == 1 and got["sdk"][0].startswith(site), got["sdk"]
