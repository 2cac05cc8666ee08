#!/usr/bin/env python3
"""Writes the command-line flags of Megatron-LM's parser as data for mme.

Run by hand when Megatron-LM moves (python3, standard library only; nothing is imported
from Megatron-LM, its sources are read with `ast`):

    scripts/megatron_lm_flags.py PATH/TO/megatron-lm [--commit SHA --date YYYY-MM-DD] \
        > framework/src/inputs/megatron_lm_flags.inc

PATH/TO/megatron-lm holds `megatron/training/arguments.py`. The flags are those the parser of
`megatron/training/arguments.py` (add_megatron_arguments) builds:
  - every `add_argument('--name', ...)` call of the functions add_megatron_arguments calls;
  - the flags `ArgumentGroupFactory(ConfigClass, exclude=[...])` generates from a config
    dataclass (megatron/training/argument_utils.py): one per dataclass field (base classes
    included) that is not excluded and not `init=False`, named `--field-name`, a bool field
    with default False a switch, any other bool field the switches `--no-field-name` and
    `--disable-field-name`, a list field one or more values, and `argparse_meta` in the
    field's metadata overriding the names (`arg_names`), `nargs` or `action`.
Each flag gets the number of values it takes (argparse's action and nargs).

The commit is read from the README.md beside PATH (the reference snapshot's table) unless
--commit and --date are given.
"""

import argparse
import ast
import os
import re
import sys

SWITCH_ACTIONS = {"store_true", "store_false", "store_const", "count", "help", "version", "append_const"}


def arity(action, nargs):
    """(min, max) values of an argparse option; max -1 = unbounded."""
    if action in SWITCH_ACTIONS:
        return (0, 0)
    if nargs is None:
        return (1, 1)
    if nargs == "+":
        return (1, -1)
    if nargs == "*":
        return (0, -1)
    if nargs == "?":
        return (0, 1)
    if isinstance(nargs, int):
        return (nargs, nargs)
    raise ValueError(f"nargs {nargs!r}")


def const(node):
    """The Python value of a literal node (strings, numbers, lists, dicts), else a marker."""
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return NotImplemented


class Sources:
    """The dataclasses of the Megatron-LM tree, by class name."""

    def __init__(self, root):
        self.classes = {}
        for folder, _, files in os.walk(os.path.join(root, "megatron")):
            for f in files:
                if not f.endswith(".py"):
                    continue
                path = os.path.join(folder, f)
                with open(path, encoding="utf-8") as fh:
                    tree = ast.parse(fh.read(), path)
                for node in tree.body:
                    if isinstance(node, ast.ClassDef):
                        self.classes.setdefault(node.name, []).append((path, node))

    def find(self, name):
        found = self.classes.get(name, [])
        if len(found) != 1:
            raise SystemExit(f"class {name}: {len(found)} definitions in the tree")
        return found[0]


def annotation_kind(node):
    """'bool', 'list' or 'value' for a dataclass field's annotation (Optional / X | None unwrapped)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        node = ast.parse(node.value, mode="eval").body
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        # X | None: argparse_utils takes X when the second member is None.
        if isinstance(node.right, ast.Constant) and node.right.value is None:
            return annotation_kind(node.left)
        return "union"
    if isinstance(node, ast.Subscript):
        base = ast.unparse(node.value)
        if base in ("Optional", "typing.Optional"):
            return annotation_kind(node.slice)
        if base in ("Union", "typing.Union"):
            members = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if len(members) == 2 and isinstance(members[1], ast.Constant) and members[1].value is None:
                return annotation_kind(members[0])
            return "union"
        if base in ("list", "List", "typing.List"):
            return "list"
        if base in ("ClassVar", "typing.ClassVar"):
            return "classvar"
        return "value"
    if isinstance(node, ast.Name) and node.id == "bool":
        return "bool"
    return "value"


def dataclass_flags(sources, class_name, exclude):
    """The flags ArgumentGroupFactory(class_name, exclude).build_group adds."""
    path, cls = sources.find(class_name)
    fields = []
    # Base classes first, as dataclasses.fields() lists them.
    for base in cls.bases:
        base_name = ast.unparse(base)
        if base_name in ("object",):
            continue
        fields.extend(dataclass_fields(sources, base_name))
    fields.extend(own_fields(cls))
    by_name = {}
    for f in fields:  # a redefined field keeps its first position and takes the last definition
        by_name[f["name"]] = f
    order = []
    for f in fields:
        if f["name"] not in order:
            order.append(f["name"])
    out = []
    for name in order:
        f = by_name[name]
        if name in exclude or f["init"] is False or f["kind"] == "classvar":
            continue
        meta = f["meta"]
        names = ["--" + name.replace("_", "-")]
        action, nargs = None, None
        if f["kind"] == "bool":
            action = "store_true" if f["default"] is False else "store_false"
            if action == "store_false":
                names = ["--no-" + name.replace("_", "-"), "--disable-" + name.replace("_", "-")]
        elif f["kind"] == "list":
            nargs = "+"
        elif f["kind"] == "union" and meta is None:
            raise SystemExit(f"{class_name}.{name}: a Union without argparse_meta (argparse would fail)")
        if meta:
            names = meta.get("arg_names", names)
            action = meta.get("action", action)
            nargs = meta.get("nargs", nargs)
        for n in names:
            out.append((n, arity(action, nargs), f"{class_name}.{name}"))
    return out


def dataclass_fields(sources, class_name):
    _, cls = sources.find(class_name)
    fields = []
    for base in cls.bases:
        fields.extend(dataclass_fields(sources, ast.unparse(base)))
    return fields + own_fields(cls)


def own_fields(cls):
    fields = []
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        f = {"name": node.target.id, "kind": annotation_kind(node.annotation), "init": True, "meta": None,
             "default": NotImplemented}
        v = node.value
        if isinstance(v, ast.Call) and ast.unparse(v.func) in ("field", "dataclasses.field"):
            for kw in v.keywords:
                if kw.arg == "default":
                    f["default"] = const(kw.value)
                elif kw.arg == "init":
                    f["init"] = const(kw.value)
                elif kw.arg == "metadata":
                    meta = metadata_dict(kw.value)
                    if meta is not None:
                        f["meta"] = meta
        elif v is not None:
            f["default"] = const(v)
        fields.append(f)
    return fields


def metadata_dict(node):
    """The argparse_meta entry of field(metadata={...}): the keys this script needs."""
    if not isinstance(node, ast.Dict):
        return None
    for k, v in zip(node.keys, node.values):
        if const(k) != "argparse_meta" or not isinstance(v, ast.Dict):
            continue
        meta = {}
        for mk, mv in zip(v.keys, v.values):
            key = const(mk)
            if key in ("arg_names", "nargs", "action"):
                value = const(mv)
                if value is NotImplemented:
                    raise SystemExit(f"argparse_meta {key}: not a literal: {ast.unparse(mv)}")
                meta[key] = value
        return meta
    return None


def call_name(call):
    return ast.unparse(call.func)


def function_flags(sources, functions, fn, seen):
    """The flags a function of arguments.py adds, following calls to its sibling functions."""
    if fn.name in seen:
        return []
    seen.add(fn.name)
    out = []
    # Local list assignments (the exclude lists).
    lists = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = const(node.value)
            if isinstance(value, list):
                lists[node.targets[0].id] = value
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        name = call_name(node)
        if name.endswith(".add_argument"):
            names = [const(a) for a in node.args]
            if any(not isinstance(n, str) for n in names):
                raise SystemExit(f"{fn.name}: add_argument with a computed name: {ast.unparse(node)}")
            kw = {k.arg: k.value for k in node.keywords}
            action = const(kw["action"]) if "action" in kw else None
            if "action" in kw and ast.unparse(kw["action"]) in ("argparse.BooleanOptionalAction",
                                                                "BooleanOptionalAction"):
                # --name and --no-name, switches both.
                names = [const(a) for a in node.args]
                names += ["--no-" + n[2:] for n in names if n.startswith("--")]
                node = ast.Call(func=node.func, args=[ast.Constant(n) for n in names], keywords=[])
                kw, action = {}, "store_true"
            nargs = const(kw["nargs"]) if "nargs" in kw else None
            if action is NotImplemented or nargs is NotImplemented:
                raise SystemExit(f"{fn.name}: computed action or nargs: {ast.unparse(node)}")
            for n in names:
                if n.startswith("--"):
                    out.append((n, arity(action, nargs), fn.name))
        elif name == "ArgumentGroupFactory":
            cls = ast.unparse(node.args[0])
            exclude = []
            for k in node.keywords:
                if k.arg == "exclude":
                    exclude = lists[k.value.id] if isinstance(k.value, ast.Name) else const(k.value)
                    if not isinstance(exclude, list):
                        raise SystemExit(f"{fn.name}: exclude is not a literal list: {ast.unparse(k.value)}")
            out.extend(dataclass_flags(sources, cls, set(exclude)))
        elif name in functions:
            out.extend(function_flags(sources, functions, functions[name], seen))
    return out


def reference_commit(root):
    readme = os.path.join(os.path.dirname(os.path.abspath(root)), "README.md")
    if not os.path.exists(readme):
        return None, None
    with open(readme, encoding="utf-8") as fh:
        for line in fh:
            if "Megatron-LM" in line:
                m = re.search(r"commit ([0-9a-f]{7,40}), (\d{4}-\d{2}-\d{2})", line)
                if m:
                    return m.group(1), m.group(2)
    return None, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("megatron_lm", help="the folder holding megatron/training/arguments.py")
    ap.add_argument("--commit")
    ap.add_argument("--date")
    args = ap.parse_args()
    commit, date = args.commit, args.date
    if not commit:
        commit, date = reference_commit(args.megatron_lm)
    if not commit or not date:
        raise SystemExit("no commit found in the README.md beside the tree: give --commit and --date")
    path = os.path.join(args.megatron_lm, "megatron", "training", "arguments.py")
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    sources = Sources(args.megatron_lm)
    flags = function_flags(sources, functions, functions["add_megatron_arguments"], set())
    seen = {}
    for name, (lo, hi), origin in flags:
        if name in seen:
            raise SystemExit(f"{name}: defined twice ({seen[name][1]}, {origin}): argparse would refuse it")
        seen[name] = ((lo, hi), origin)
    out = sys.stdout
    out.write(
        "// Megatron-LM's command-line flags: every option of the parser megatron/training/arguments.py\n"
        "// builds (add_megatron_arguments: its add_argument calls and the flags ArgumentGroupFactory\n"
        "// generates from the config dataclasses, less their exclude lists), with the number of values\n"
        "// each takes (min, max; -1 = any number).\n"
        f"// Source: NVIDIA/Megatron-LM commit {commit} ({date}).\n"
        "// Generated by scripts/megatron_lm_flags.py: do not edit, re-run it.\n"
        f'#define MME_MEGATRON_LM_COMMIT "{commit}"\n'
        f'#define MME_MEGATRON_LM_DATE "{date}"\n')
    for name in sorted(seen):
        (lo, hi), origin = seen[name]
        out.write(f'MME_MEGATRON_LM_FLAG("{name[2:]}", {lo}, {hi})  // {origin}\n')
    print(f"{len(seen)} flags", file=sys.stderr)


if __name__ == "__main__":
    main()
