#!/usr/bin/env python3
"""Writes the mme package's type stub: python/mme/__init__.pyi.in with each "# @SETUP_KEYWORDS@"
line replaced by one keyword per name of the setup schema (mme.setup_keywords(), read from the
built package). Run by python/CMakeLists.txt after the extension is built:

    gen_stub.py TEMPLATE OUTPUT      (with the staged package on PYTHONPATH)
"""

import os
import sys


def python_type(kind: str, knob: dict) -> str:
    if kind in ("bool", "switch"):
        return "bool"
    if kind == "int":
        return "int"
    if kind == "number":
        return "float"
    if kind == "enum":
        values = [v for v in knob.get("values", [])]
        return "Literal[" + ", ".join(f'"{v}"' for v in values) + "]" if values else "str"
    if kind == "modules":
        return "str | Sequence[str]"
    if kind == "env":
        return "Sequence[str] | Mapping[str, str] | str"
    return "str"


def main() -> int:
    template, output = sys.argv[1], sys.argv[2]
    import mme

    lines = []
    for name, entry in mme.setup_keywords().items():
        lines.append(f"    {name}: {python_type(entry['kind'], entry['knob'])} | None = ...,\n")
    out = []
    with open(template, encoding="utf-8") as f:
        for line in f:
            out.extend(lines if line.strip() == "# @SETUP_KEYWORDS@" else [line])
    text = "".join(out)
    with open(output + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(output + ".tmp", output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
