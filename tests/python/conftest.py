"""Shared by the Python tests: the `mme` executable of the same build (the oracle: the module
must give what the CLI prints), and the build's folders. CTest sets the environment
(tests/python/CMakeLists.txt): MME_TEST_CLI, MME_TEST_SOURCE_DIR, MME_TEST_BINARY_DIR,
MME_TEST_PLUGIN_DIR, MME_TEST_PYTHON, and PYTHONPATH=stage/python."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass

import pytest


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run the Python tests through CTest (tests/python/CMakeLists.txt)")
    return value


CLI = _env("MME_TEST_CLI")
SOURCE_DIR = _env("MME_TEST_SOURCE_DIR")
BINARY_DIR = _env("MME_TEST_BINARY_DIR")
PLUGIN_DIR = _env("MME_TEST_PLUGIN_DIR")
PYTHON = _env("MME_TEST_PYTHON")


@dataclass
class CliRun:
    code: int
    out: str
    err: str

    def json(self) -> dict:
        assert self.code == 0, f"mme exited {self.code}: {self.err}"
        return json.loads(self.out)

    def error_message(self) -> str:
        """The message of the `mme: error: MESSAGE` line."""
        lines = [l for l in self.err.splitlines() if l.startswith("mme: error: ")]
        assert len(lines) == 1, self.err
        return lines[0][len("mme: error: "):]


def run_cli(*args: str, env: dict | None = None) -> CliRun:
    p = subprocess.run([CLI, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=300)
    return CliRun(p.returncode, p.stdout, p.stderr)


@pytest.fixture(scope="session")
def cli():
    return run_cli
