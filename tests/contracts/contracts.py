#!/usr/bin/env python3
"""The published contracts (docs/cli.md, "Contracts"), checked against what mme really writes.

    contracts.py --mme BIN --schemas DIR --source REPO --work DIR GROUP

GROUP is one of the test groups below (CTest runs each as contracts.<group>). Every document is
produced by running the built `mme` (never written here) and validated with python3-jsonschema
(Draft 2020-12) against the installed-layout schemas of the build tree (stage/share/mme/schema).
The mutation groups check the other direction: a document or an input file with a renamed,
missing or mistyped field fails validation (and, for inputs, mme refuses it too).
"""

import argparse
import copy
import json
import os
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

import jsonschema
import yaml

ID_BASE = "https://megatron-memory-estimator.invalid/schema/v1/"
SCHEMA_VERSION = 1

# The schemas written by hand (schema/*.schema.json) and the generated ones; docs/cli.md lists
# every one in its "Contracts" section.
GENERATED = {"spec-file.schema.json", "setup.schema.json"}


class Failure(Exception):
    pass


class Context:
    def __init__(self, args):
        self.mme = args.mme
        self.schemas = Path(args.schemas)
        self.source = Path(args.source)
        self.work = Path(args.work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.validators = {}
        self.failures = []
        self.checked = 0

    def schema(self, name):
        return json.loads((self.schemas / name).read_text())

    def validator(self, name):
        if name not in self.validators:
            schema = self.schema(name)
            jsonschema.Draft202012Validator.check_schema(schema)
            self.validators[name] = jsonschema.Draft202012Validator(schema)
        return self.validators[name]

    def errors(self, name, doc):
        return sorted(self.validator(name).iter_errors(doc), key=lambda e: list(e.absolute_path))

    def expect_valid(self, name, doc, what):
        self.checked += 1
        errs = self.errors(name, doc)
        if errs:
            lines = [f"  at /{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in errs[:8]]
            self.fail(f"{what}: not valid against {name} ({len(errs)} errors)\n" + "\n".join(lines))

    def expect_invalid(self, name, doc, what):
        self.checked += 1
        if not self.errors(name, doc):
            self.fail(f"{what}: valid against {name}, expected a failure")

    def fail(self, message):
        self.failures.append(message)
        print("FAIL:", message, file=sys.stderr)

    def run(self, args, expect_rc=0, env=None):
        full_env = dict(os.environ)
        full_env.update({"HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "MME_PLUGIN_PATH": "", "MME_HARDWARE_PATH": "",
                         "MME_HARDWARE_FILES": "", "MME_MODELS_PATH": ""})
        if env:
            full_env.update(env)
        p = subprocess.run([self.mme] + list(args), capture_output=True, text=True, env=full_env, timeout=600)
        if expect_rc is not None and p.returncode != expect_rc:
            raise Failure(f"mme {' '.join(args)}: exit {p.returncode}, expected {expect_rc}\n{p.stderr[-2000:]}")
        return p

    def json_of(self, args, **kw):
        p = self.run(args, **kw)
        try:
            return json.loads(p.stdout)
        except json.JSONDecodeError as e:
            raise Failure(f"mme {' '.join(args)}: stdout is not one JSON document: {e}")


# --- the schemas themselves ------------------------------------------------------------------

def group_schemas(c):
    """Each schema is a valid 2020-12 schema with its $id and schema_version; every hand-written
    one is installed; docs/cli.md's Contracts section names each."""
    installed = sorted(p.name for p in c.schemas.glob("*.schema.json"))
    hand = sorted(p.name for p in (c.source / "schema").glob("*.schema.json"))
    if not hand:
        c.fail("no hand-written schema in schema/")
    for name in hand:
        if name not in installed:
            c.fail(f"schema/{name} is not staged in {c.schemas}")
    for name in GENERATED:
        if name not in installed:
            c.fail(f"the generated {name} is not staged")
    docs = (c.source / "docs" / "cli.md").read_text()
    section = docs[docs.find("## Contracts"):]
    if "## Contracts" not in docs:
        c.fail("docs/cli.md has no Contracts section")
    for name in installed:
        s = c.schema(name)
        c.checked += 1
        try:
            jsonschema.Draft202012Validator.check_schema(s)
        except jsonschema.SchemaError as e:
            c.fail(f"{name}: not a valid Draft 2020-12 schema: {e.message}")
        if s.get("$schema") != "https://json-schema.org/draft/2020-12/schema":
            c.fail(f"{name}: $schema is {s.get('$schema')}")
        if s.get("$id") != ID_BASE + name:
            c.fail(f"{name}: $id is {s.get('$id')}, expected {ID_BASE + name}")
        if s.get("schema_version") != SCHEMA_VERSION:
            c.fail(f"{name}: schema_version is {s.get('schema_version')}")
        if f"`{name}`" not in section:
            c.fail(f"docs/cli.md's Contracts section does not list `{name}`")
        # Bundled: no reference leaves the file, no placeholder is left.
        text = json.dumps(s)
        if "x-mme-generated\"" in text:
            c.fail(f"{name}: a generated placeholder was not replaced")
        for ref in re.findall(r'"\$ref": "([^"]*)"', text):
            if not ref.startswith("#"):
                c.fail(f"{name}: $ref {ref} leaves the file")
    print(f"{len(installed)} schemas")


# --- output documents ------------------------------------------------------------------------

ESTIMATE_CASES = [
    ("dense", ["Qwen/Qwen3-8B", "--tp", "2", "--pp", "2", "--num-gpus", "8"]),
    ("moe_mla_uneven_pp", ["deepseek-ai/DeepSeek-V3", "--tp", "4", "--pp", "4", "--ep", "8", "--num-gpus", "128",
                           "--num-layers-in-last-pipeline-stage", "16"]),
    ("uneven_first_last", ["meta-llama/Meta-Llama-3-8B", "--pp", "4", "--num-layers-in-first-pipeline-stage", "5",
                           "--num-layers-in-last-pipeline-stage", "7", "--num-gpus", "8"]),
    ("vpp", ["Qwen/Qwen3-8B", "--pp", "2", "--vpp", "3", "--num-gpus", "8", "--global-batch-size", "64"]),
    ("layout_string", ["Qwen/Qwen3-8B", "--pp", "2", "--pipeline-layout", "Et*18|t*18L", "--num-gpus", "2"]),
    ("verbose", ["deepseek-ai/DeepSeek-V2-Lite", "--ep", "8", "--num-gpus", "8", "--verbose"]),
    ("moe_cp_recompute", ["Qwen/Qwen3-30B-A3B", "--tp", "2", "--cp", "2", "--ep", "4", "--num-gpus", "16",
                          "--recompute-granularity", "full", "--recompute-method", "block",
                          "--recompute-num-layers", "2"]),
    ("selective_fp8", ["Qwen/Qwen3-8B", "--tp", "2", "--precision", "fp8", "--fp8-param-gather",
                       "--recompute-modules", "core_attn,mlp", "--gpu", "H100"]),
    ("fp32", ["Qwen/Qwen2.5-0.5B", "--precision", "fp32", "--num-gpus", "1"]),
    ("megatron_fsdp", ["Qwen/Qwen3-8B", "--use-megatron-fsdp", "--num-gpus", "8", "--fsdp-double-buffer"]),
    ("torch_fsdp2", ["Qwen/Qwen3-8B", "--use-torch-fsdp2", "--num-gpus", "8"]),
    ("env_and_precision_aware", ["Qwen/Qwen3-8B", "--env", "NVTE_FUSED_ATTN=0", "--use-precision-aware-optimizer",
                                 "--exp-avg-dtype", "bf16", "--num-gpus", "8", "--cublas-workspace-config",
                                 ":4096:8"]),
    ("no_fit", ["deepseek-ai/DeepSeek-V3", "--num-gpus", "8", "--ep", "8"]),
    ("mtp_gemma", ["google/gemma-2-9b-it", "--tp", "2", "--num-gpus", "2", "--fit-on", "estimate"]),
    ("megatron_args", ["--megatron-args", "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 1024 "
                       "--max-position-embeddings 4096 --micro-batch-size 2 --vocab-size 1000 "
                       "--tokenizer-type NullTokenizer --pipeline-model-parallel-size 2 --bf16", "--num-gpus", "4"]),
]


def check_activation_fields(c, doc, what):
    """activation_bytes_b is bytes / 1e9; the deprecated activation_b keeps bytes / 2 / 1e9."""
    for st in doc["stages"]:
        b = st["activation_bytes"]
        if abs(st["activation_bytes_b"] - b / 1e9) > 1e-9 * max(1.0, b / 1e9):
            c.fail(f"{what}: stage {st['pp_rank']}: activation_bytes_b {st['activation_bytes_b']} != {b} / 1e9")
        if abs(st["activation_b"] - b / 2e9) > 1e-9 * max(1.0, b / 2e9):
            c.fail(f"{what}: stage {st['pp_rank']}: activation_b {st['activation_b']} != {b} / 2e9")


def group_estimate(c):
    kinds_with_terms = 0
    for name, args in ESTIMATE_CASES:
        doc = c.json_of(["estimate"] + args + ["--json"])
        c.expect_valid("estimate.schema.json", doc, f"estimate {name}")
        check_activation_fields(c, doc, f"estimate {name}")
        kinds_with_terms += sum(1 for k in doc["layer_kinds"] if k["activation_terms"])
        if name == "no_fit" and not doc["next_steps"]:
            c.fail("estimate no_fit: no next_steps (the case must exercise them)")
        if name == "megatron_fsdp" and doc["setup"].get("sharded_data_parallel") != "megatron_fsdp":
            c.fail("estimate megatron_fsdp: the setup block has no Megatron-FSDP")
    if kinds_with_terms == 0:
        c.fail("no estimate had per-layer activation terms")
    # A spec file as the input gives the same document shape.
    doc = c.json_of(["estimate", "--config", str(c.source / "examples/specs/deepseek-v2-lite.yaml"), "--json"])
    c.expect_valid("estimate.schema.json", doc, "estimate --config deepseek-v2-lite.yaml")
    # The text report's seed-style line is the same figure, in billions of bytes.
    for name, args in ESTIMATE_CASES[:3]:
        doc = c.json_of(["estimate"] + args + ["--json"])
        text = c.run(["estimate"] + args).stdout
        got = re.findall(r"^  Activations: ([0-9.]+)B bytes$", text, re.M)
        want = [f"{st['activation_bytes'] / 1e9:.2f}" for st in doc["stages"]]
        if got != want:
            c.fail(f"estimate {name}: text 'Activations:' lines {got}, expected {want} (activation_bytes / 1e9)")
    print(f"{len(ESTIMATE_CASES) + 1} estimates")


def group_errors(c):
    """Errors have no JSON form: with --json, a failing command leaves stdout empty and says one
    line on stderr."""
    for args, rc in [(["estimate", "Qwen/Qwen3-235B-A22B", "--tp", "3", "--json"], 4),
                     (["estimate", "no-such-org/no-such-model", "--json"], 6),
                     (["plan", "Qwen/Qwen3-8B", "--num-gpus", "3", "--tp", "8", "--json"], None),
                     (["params", "--json"], 2)]:
        p = c.run(args, expect_rc=None)
        c.checked += 1
        if p.returncode == 0 or (rc is not None and p.returncode != rc):
            c.fail(f"mme {' '.join(args)}: exit {p.returncode}, expected {rc or 'an error'}")
        if p.stdout:
            c.fail(f"mme {' '.join(args)}: an error wrote to stdout: {p.stdout[:200]}")
        lines = [l for l in p.stderr.splitlines() if l.startswith("mme: error: ")]
        if len(lines) != 1:
            c.fail(f"mme {' '.join(args)}: expected one 'mme: error:' line, got {p.stderr[-500:]}")


def group_plan(c):
    with_fits = c.json_of(["plan", "Qwen/Qwen3-8B", "--num-gpus", "8", "--gpu", "H100", "--json", "--threads", "2"])
    c.expect_valid("plan.schema.json", with_fits, "plan with fits")
    if with_fits["fitting"] == 0 or not with_fits["plans"]:
        c.fail("plan with fits: nothing fits (the case must have plans)")
    sorted_peak = c.json_of(["plan", "deepseek-ai/DeepSeek-V2-Lite", "--num-gpus", "16", "--gpu", "H100",
                             "--sort", "peak", "--top", "3", "--json", "--threads", "2",
                             "--global-batch-size", "64"])
    c.expect_valid("plan.schema.json", sorted_peak, "plan --sort peak")
    knobs = c.json_of(["plan", "Qwen/Qwen3-8B", "--num-gpus", "8", "--gpu", "H100", "--json", "--threads", "2",
                       "--top", "3", "--dp-sharding", "dist_opt,optim_grads_params",
                       "--optimizer-offload-fraction", "0,0.5", "--cuda-graphs", "off,attn"])
    c.expect_valid("plan.schema.json", knobs, "plan with the knobs searched")
    if "cost_figures" not in knobs or any("knobs" not in p for p in knobs["plans"]):
        c.fail("plan with the knobs searched: no cost_figures or a plan without its knobs")
    no_fit = c.json_of(["plan", "deepseek-ai/DeepSeek-V3", "--num-gpus", "8", "--gpu", "A100-SXM-40GB", "--json",
                        "--threads", "2"])
    c.expect_valid("plan.schema.json", no_fit, "plan without fits")
    if no_fit["fitting"] != 0 or "suggestions" not in no_fit:
        c.fail("plan without fits: the case must fit nothing and carry suggestions")
    # The schema ties the two shapes to `fitting`: a fitting plan with suggestions is refused.
    broken = copy.deepcopy(with_fits)
    broken["suggestions"] = []
    c.expect_invalid("plan.schema.json", broken, "plan with fits plus suggestions")
    broken = copy.deepcopy(no_fit)
    del broken["suggestions"]
    c.expect_invalid("plan.schema.json", broken, "plan without fits, without suggestions")


def group_compare(c):
    doc = c.json_of(["compare", "Qwen/Qwen3-8B", "--tp", "1,2,3", "--pp", "1,2", "--num-gpus", "8", "--json"])
    c.expect_valid("compare.schema.json", doc, "compare")
    if not any(l["error"] for l in doc["layouts"]) or all(l["error"] for l in doc["layouts"]):
        c.fail("compare: the case must hold refused and estimated layouts")


def group_params(c):
    for model in ["Qwen/Qwen3-8B", "deepseek-ai/DeepSeek-V3", "google/gemma-2-9b-it", "mistralai/Mixtral-8x7B-v0.1",
                  "deepseek-ai/DeepSeek-V2-Lite"]:
        doc = c.json_of(["params", model, "--json"])
        c.expect_valid("params.schema.json", doc, f"params {model}")


def group_listings(c):
    models = c.json_of(["models", "--json"])
    c.expect_valid("models.schema.json", models, "models")
    if len(models["models"]) < 10:
        c.fail(f"models: only {len(models['models'])} bundled models")
    hw = c.json_of(["hardware", "--json"])
    c.expect_valid("hardware.schema.json", hw, "hardware")
    extra = c.work / "lab.json"
    extra.write_text(json.dumps([{"name": "Lab-GPU-24GB", "memory_gib": 24, "$schema": "x", "_note": "a comment"}]))
    hw2 = c.json_of(["hardware", "--json", "--hardware-file", str(extra)])
    c.expect_valid("hardware.schema.json", hw2, "hardware --hardware-file")
    if not any(h["name"] == "Lab-GPU-24GB" for h in hw2["hardware"]):
        c.fail("hardware --hardware-file: the file's profile is missing")
    plugins = c.json_of(["plugins", "--json"])
    c.expect_valid("plugins.schema.json", plugins, "plugins")


def group_validate(c):
    acc = c.source / "bench" / "accuracy"
    functional = c.json_of(["validate", str(acc / "megatron_functional_test_memory.csv"), "--json"])
    c.expect_valid("validate.schema.json", functional, "validate functional tests")
    statuses = {case["status"] for case in functional["cases"]}
    if not {"ok", "skipped"} <= statuses:
        c.fail(f"validate functional tests: statuses {statuses}, expected ok and skipped rows")
    real = c.json_of(["validate", str(acc / "real_runs.csv"), "--json"])
    c.expect_valid("validate.schema.json", real, "validate real runs")
    # A row that fails to estimate ("error") and a bad measured row ("refused"): their shapes.
    csv = c.work / "cases.csv"
    csv.write_text("model,test_case,golden,max_alloc_GiB_max,alloc_GiB_median,nodes_gpus,num-layers,hidden-size,"
                   "num-attention-heads,seq-length,max-position-embeddings,micro-batch-size,vocab-size,tokenizer-type,"
                   "tensor-model-parallel-size\n"
                   "gpt,tiny,dgx_h100,2.5,1.5,1x8,4,256,8,1024,4096,1,1000,NullTokenizer,1\n"
                   "gpt,tp3,dgx_h100,2.5,1.5,1x8,4,256,8,1024,4096,1,1000,NullTokenizer,3\n"
                   "gpt,bad,dgx_h100,x,1.5,1x8,4,256,8,1024,4096,1,1000,NullTokenizer,1\n")
    small = c.json_of(["validate", str(csv), "--json"])
    c.expect_valid("validate.schema.json", small, "validate with error rows")
    if [case["status"] for case in small["cases"]] != ["ok", "error", "refused"]:
        c.fail(f"validate with error rows: statuses {[x['status'] for x in small['cases']]}")
    flags = ("--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings "
             "4096 --micro-batch-size 2 --vocab-size 1000 --tokenizer-type NullTokenizer "
             "--pipeline-model-parallel-size 2 --bf16")
    log = c.work / "train.log"
    log.write_text("[Rank 0] (after 1 iterations) memory (MB) | allocated: 100.00 | max allocated: 300.00 | "
                   "reserved: 400.00 | max reserved: 400.00\n"
                   "[Rank 3] (after 1 iterations) memory (MB) | allocated: 100.00 | max allocated: 250.00 | "
                   "reserved: 400.00 | max reserved: 400.00\n"
                   "mem-max-allocated-bytes: 536870912\n")
    from_log = c.json_of(["validate", "--from-log", str(log), "--megatron-args", flags, "--num-gpus", "4", "--json"])
    c.expect_valid("validate.schema.json", from_log, "validate --from-log")
    # The three shapes are told apart by `format`: one shape's fields under another's name fail.
    for doc, other in [(functional, "real_runs"), (real, "log"), (from_log, "functional_test")]:
        broken = copy.deepcopy(doc)
        broken["format"] = other
        c.expect_invalid("validate.schema.json", broken, f"validate {doc['format']} relabelled {other}")


# --- mutations of output documents -----------------------------------------------------------

# Keys of maps (components, parameter terms, parameter groups beyond the fixed ones, the open
# layer_kinds entries) may be renamed or left out; every other key is a field of a closed object.
OPEN = {
    "estimate.schema.json": [r"^/stages/\d+/(device_)?components/.", r"^/layer_kinds/\d+/(parameter|activation)_terms/."],
    "params.schema.json": [r"^/(active_)?breakdown/(?!(embedding|output_layer|attention|dense_mlp|routed_experts|"
                           r"shared_experts|router|norms|mtp)$)[^/]+$"],
    "plan.schema.json": [],
    "validate.schema.json": [],
}
# Keys that a valid document may lack (written only in some setups, or only in some shapes).
OPTIONAL = {
    "estimate.schema.json": [],
    "params.schema.json": [],
    "plan.schema.json": [],
    "validate.schema.json": [],
}


def object_keys(doc, path=()):
    """(path, key) of every key of every object, the path a tuple of keys and indices (component
    names hold '/')."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield path + (k,), k
            yield from object_keys(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from object_keys(v, path + (i,))


def at(doc, path):
    for part in path:
        doc = doc[part]
    return doc


def pointer(path):
    return "/" + "/".join(str(p) for p in path)


def mutate_every_key(c, name, doc, what, sample_limit=4):
    """Renaming any key of a closed object fails validation; so does deleting it (every field of
    these documents is required where the document has it); a key of a documented map may be
    renamed or left out. Arrays are sampled: the first `sample_limit` items of each list."""
    open_res = [re.compile(r) for r in OPEN[name]]
    renamed = deleted = retyped = 0
    for path, key in list(object_keys(doc)):
        if any(isinstance(p, int) and p >= sample_limit for p in path):
            continue
        is_open = any(r.match(pointer(path)) for r in open_res)
        for kind in ("rename", "delete"):
            m = copy.deepcopy(doc)
            parent = at(m, path[:-1])
            value = parent.pop(key)
            if kind == "rename":
                parent[key + "_renamed"] = value
            errs = c.errors(name, m)
            c.checked += 1
            if is_open:
                if errs:
                    c.fail(f"{what}: {kind} of map key {pointer(path)} fails validation ({errs[0].message[:200]})")
            elif not errs:
                c.fail(f"{what}: {kind} of {pointer(path)} still validates")
            renamed += kind == "rename"
            deleted += kind == "delete"
        # A field of the wrong type fails too: a scalar replaced by a list holding it (no field of
        # these documents is a list where a scalar is).
        value = at(doc, path)
        if isinstance(value, (dict, list)) or value is None:
            continue
        m = copy.deepcopy(doc)
        at(m, path[:-1])[key] = [value]
        c.checked += 1
        if not c.errors(name, m):
            c.fail(f"{what}: {pointer(path)} as a list still validates")
        retyped += 1
    print(f"{what}: {renamed} renames, {deleted} deletions, {retyped} type changes")


def group_mutations(c):
    estimate = c.json_of(["estimate", "deepseek-ai/DeepSeek-V3", "--tp", "4", "--pp", "4", "--ep", "8", "--num-gpus",
                          "128", "--num-layers-in-last-pipeline-stage", "16", "--json"])
    mutate_every_key(c, "estimate.schema.json", estimate, "estimate", sample_limit=2)
    # An unknown top-level field and a field of the next version fail.
    for extra in ({"unknown": 1}, {"schema_version": 2}):
        m = dict(estimate, **extra)
        c.expect_invalid("estimate.schema.json", m, f"estimate with {extra}")
    # layer_kinds entries are closed too, their costs included.
    m = copy.deepcopy(estimate)
    m["layer_kinds"][0]["flops_per_microbatch"] = 123
    c.expect_invalid("estimate.schema.json", m, "estimate with an extra layer_kinds field")
    m = copy.deepcopy(estimate)
    m["layer_kinds"][0]["costs_per_microbatch"]["collective_bytes"]["pp"] = 1
    c.expect_invalid("estimate.schema.json", m, "estimate with an unknown collective group")
    params = c.json_of(["params", "deepseek-ai/DeepSeek-V3", "--json"])
    mutate_every_key(c, "params.schema.json", params, "params")
    plan = c.json_of(["plan", "Qwen/Qwen3-8B", "--num-gpus", "8", "--gpu", "H100", "--json", "--top", "2",
                      "--threads", "2"])
    mutate_every_key(c, "plan.schema.json", plan, "plan")
    validate = c.json_of(["validate", str(c.source / "bench/accuracy/real_runs.csv"), "--json"])
    mutate_every_key(c, "validate.schema.json", validate, "validate")
    for name, args in [("models.schema.json", ["models", "--json"]), ("hardware.schema.json", ["hardware", "--json"]),
                       ("plugins.schema.json", ["plugins", "--json"])]:
        doc = c.json_of(args)
        first = next(iter(v for k, v in doc.items() if isinstance(v, list) and v))[0]
        for key in list(first):
            for kind in ("rename", "delete"):
                m = copy.deepcopy(doc)
                item = next(iter(v for k, v in m.items() if isinstance(v, list) and v))[0]
                value = item.pop(key)
                if kind == "rename":
                    item[key + "_renamed"] = value
                c.expect_invalid(name, m, f"{args[0]}: {kind} of {key}")


# --- input files -----------------------------------------------------------------------------

def load_spec(path):
    text = Path(path).read_text()
    if str(path).endswith(".json") or text.lstrip().startswith("{"):
        return json.loads(text)
    # YAML 1.2 core schema booleans and nulls (yaml-cpp reads them so); PyYAML's 1.1 resolver
    # also takes yes/no/on/off, which mme refuses as strings: the file must not contain them.
    return yaml.safe_load(text)


def mme_accepts_spec(c, path):
    p = c.run(["estimate", "--config", str(path), "--dump-config", "--json"], expect_rc=None)
    return p.returncode == 0, p


def spec_candidates(c):
    files = sorted((c.source / "examples/specs").glob("*"))
    files += sorted((c.source / "fuzz/corpus/spec_file").glob("seed-*"))
    return files


def group_spec_files(c):
    accepted = rejected = 0
    for f in spec_candidates(c):
        ok, p = mme_accepts_spec(c, f)
        if not ok:
            rejected += 1
            # A file refused for what the schema says (a missing or unknown field, a wrong type)
            # fails the schema too; cross-field rules are mme's alone.
            if re.search(r": (required field is missing|unknown field|unknown section|expected )", p.stderr):
                c.expect_invalid("spec-file.schema.json", load_spec(f), f"spec file {f.name} ({p.stderr.strip()})")
            continue
        accepted += 1
        c.expect_valid("spec-file.schema.json", load_spec(f), f"spec file {f.relative_to(c.source)}")
        # What --dump-config writes back (JSON here) is a spec file as well.
        c.expect_valid("spec-file.schema.json", json.loads(p.stdout), f"--dump-config --json of {f.name}")
        yaml_dump = c.run(["estimate", "--config", str(f), "--dump-config"]).stdout
        c.expect_valid("spec-file.schema.json", yaml.safe_load(yaml_dump), f"--dump-config of {f.name}")
    if accepted < 4:
        c.fail(f"only {accepted} spec files accepted by mme")
    # mme init: the example, models field by field, an hf: model, JSON.
    inits = [[], ["Qwen/Qwen3-8B", "--tp", "2", "--num-gpus", "16"], ["deepseek-ai/DeepSeek-V3", "--tp", "4",
             "--pp", "4", "--ep", "8", "--num-gpus", "128", "--num-layers-in-last-pipeline-stage", "16"], ["google/gemma-2-9b-it"],
             ["mistralai/Mixtral-8x7B-v0.1", "--ep", "8", "--use-megatron-fsdp", "--num-gpus", "8"]]
    for args in inits:
        text = c.run(["init"] + args).stdout
        c.expect_valid("spec-file.schema.json", yaml.safe_load(text), f"mme init {' '.join(args)}")
        doc = c.json_of(["init"] + args + ["--json"])
        c.expect_valid("spec-file.schema.json", doc, f"mme init {' '.join(args)} --json")
    print(f"{accepted} spec files mme accepts validated, {rejected} it refuses (checked refused where the schema can say why); "
          f"{len(inits)} templates")


def group_init_header(c):
    """`mme init` starts with the YAML language server's modeline, naming the staged spec-file
    schema; the file still reads as a spec (the line is a comment)."""
    text = c.run(["init"]).stdout
    first = text.splitlines()[0]
    m = re.fullmatch(r"# yaml-language-server: \$schema=(\S+)", first)
    if not m:
        raise Failure(f"mme init's first line is {first!r}")
    uri = urllib.parse.urlparse(m.group(1))
    if uri.scheme != "file":
        raise Failure(f"mme init names {m.group(1)}, expected the staged file")
    target = Path(urllib.parse.unquote(uri.path))
    if target.resolve() != (c.schemas / "spec-file.schema.json").resolve():
        c.fail(f"mme init names {target}, expected {c.schemas / 'spec-file.schema.json'}")
    spec = c.work / "init.yaml"
    spec.write_text(text)
    ok, p = mme_accepts_spec(c, spec)
    if not ok:
        c.fail(f"mme init's own output does not read back: {p.stderr}")
    c.checked += 1


def value_breaking(prop):
    """A value the field's schema refuses, of a kind the reader refuses too (exit 3)."""
    branches = prop.get("anyOf", [prop])
    types = set()
    for b in branches:
        for inner in b.get("anyOf", [b]):
            t = inner.get("type")
            types.update(t if isinstance(t, list) else [t] if t else ["enum"])
    if types & {"integer", "number"} and "string" not in types:
        for b in branches:
            if b.get("type") in ("integer", "number") and "maximum" in b:
                return b["maximum"] * 2 + 1
            if b.get("type") in ("integer", "number") and "exclusiveMaximum" in b:
                return b["exclusiveMaximum"] + 1
        return "many"
    if types == {"boolean"} or types == {"boolean", "null"}:
        return "yes"  # a string, not YAML 1.1's boolean
    if "array" in types and "string" not in types:
        return {"a": 1}
    return ["not", "a", 1]  # a list where a scalar is


def group_spec_mutations(c):
    """Every field of the generated schema, given a value its schema refuses, is refused by the
    schema and by mme (exit 3, the message naming the field); an unknown field and a field in the
    wrong section likewise; a choice in another letter case is accepted by both."""
    schema = c.schema("spec-file.schema.json")
    base = c.json_of(["init", "Qwen/Qwen3-8B", "--tp", "2", "--num-gpus", "16", "--json"])
    c.expect_valid("spec-file.schema.json", base, "the base spec")
    tried = 0
    for section, sdef in schema["$defs"].items():
        for field, prop in sdef["properties"].items():
            if section == "model" and field == "hf":
                continue  # hf changes the model's source; its value is checked by loading it
            m = copy.deepcopy(base)
            m.setdefault(section, {})
            if m[section] is None:
                m[section] = {}
            m[section][field] = value_breaking(prop)
            c.expect_invalid("spec-file.schema.json", m, f"spec {section}.{field} = {m[section][field]!r}")
            f = c.work / f"mutated-{section}-{field}.json"
            f.write_text(json.dumps(m))
            p = c.run(["estimate", "--config", str(f), "--dump-config", "--json"], expect_rc=None)
            c.checked += 1
            if p.returncode != 3 or f"{section}.{field}" not in p.stderr:
                c.fail(f"spec {section}.{field} = {m[section][field]!r}: mme exit {p.returncode}, {p.stderr.strip()}")
            tried += 1
    for where, mutation in [("unknown field", ("training", "micro_batch_sizes", 1)),
                            ("field of another section", ("parallelism", "seq_length", 4096)),
                            ("unknown section", ("optimizer", None, {"lr": 1}))]:
        m = copy.deepcopy(base)
        section, field, value = mutation
        if field is None:
            m[section] = value
        else:
            m[section][field] = value
        c.expect_invalid("spec-file.schema.json", m, f"spec with an {where}")
        f = c.work / "mutated-extra.json"
        f.write_text(json.dumps(m))
        if mme_accepts_spec(c, f)[0]:
            c.fail(f"mme accepts a spec with an {where}")
    # Required fields: left out of the file, the schema and mme refuse it.
    for section, field in [("model", "hidden_size"), ("parallelism", "tensor_model_parallel_size"),
                           ("infrastructure", "world_size")]:
        m = copy.deepcopy(base)
        del m[section][field]
        c.expect_invalid("spec-file.schema.json", m, f"spec without {section}.{field}")
        f = c.work / "mutated-missing.json"
        f.write_text(json.dumps(m))
        if mme_accepts_spec(c, f)[0]:
            c.fail(f"mme accepts a spec without {section}.{field}")
    # With an hf base the model fields are optional.
    hf = {"model": {"hf": "Qwen/Qwen3-8B", "num_layers": 4}, "parallelism": base["parallelism"],
          "training": base["training"], "infrastructure": base["infrastructure"]}
    c.expect_valid("spec-file.schema.json", hf, "spec with an hf base")
    # Choices ignore case, in the schema as in mme.
    m = copy.deepcopy(base)
    m["precision"]["params_dtype"] = "BF16"
    m["model"]["normalization"] = "rmsnorm"
    c.expect_valid("spec-file.schema.json", m, "spec with choices in another case")
    f = c.work / "mutated-case.json"
    f.write_text(json.dumps(m))
    if not mme_accepts_spec(c, f)[0]:
        c.fail("mme refuses choices in another case")
    print(f"{tried} fields given a wrong value")


def doc_example_profiles(c):
    text = (c.source / "docs/plugin-authoring.md").read_text()
    section = text[text.find("## Hardware profiles without a compiler"):]
    return [json.loads(b) for b in re.findall(r"```json\n(.*?)```", section, re.S)[:1]]


def mme_accepts_profiles(c, path):
    p = c.run(["hardware", "--json", "--hardware-file", str(path)], expect_rc=None)
    return p.returncode == 0 and "skipped" not in p.stderr


def group_hardware_files(c):
    """Every hardware profile file mme loads (the fuzz seeds, the documented example) is valid;
    every file the schema refuses, mme refuses too; mutated profiles fail both."""
    files = sorted((c.source / "fuzz/corpus/hardware_json").glob("*.json"))
    for i, doc in enumerate(doc_example_profiles(c)):
        f = c.work / f"documented-{i}.json"
        f.write_text(json.dumps(doc))
        files.append(f)
    loaded = refused_both = refused_by_mme_only = 0
    for f in files:
        try:
            doc = json.loads(f.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            doc = None
        accepted = mme_accepts_profiles(c, f)
        schema_ok = doc is not None and not c.errors("hardware-profile.schema.json", doc)
        c.checked += 1
        if accepted and not schema_ok:
            c.fail(f"{f.name}: mme loads it but the schema refuses it")
        loaded += accepted
        refused_both += not accepted and not schema_ok
        refused_by_mme_only += not accepted and schema_ok
    if loaded < 2:
        c.fail(f"only {loaded} hardware files loaded")
    base = {"name": "Schema-Test-GPU", "memory_gib": 48, "aliases": ["stg"], "reserved_gib": 1.5}
    mutations = [("memory_gb", lambda d: d.update(memory_gb=d.pop("memory_gib"))),
                 ("no memory", lambda d: d.pop("memory_gib")),
                 ("no name", lambda d: d.pop("name")),
                 ("memory as a string", lambda d: d.update(memory_gib="48")),
                 ("negative reserve", lambda d: d.update(reserved_gib=-1)),
                 ("memory in bytes", lambda d: d.update(memory_gib=48 * 2**30)),
                 ("alias not a string", lambda d: d.update(aliases=[7])),
                 ("name of dashes", lambda d: d.update(name="--")),
                 ("zero bf16_tflops", lambda d: d.update(bf16_tflops=0)),
                 ("a denormal bandwidth", lambda d: d.update(hbm_bandwidth_gbps=1e-300)),
                 ("empty array", None)]
    ok_file = c.work / "profile-ok.json"
    ok_file.write_text(json.dumps(base))
    c.expect_valid("hardware-profile.schema.json", base, "the base profile")
    if not mme_accepts_profiles(c, ok_file):
        c.fail("mme refuses the base profile")
    for what, change in mutations:
        doc = [] if change is None else copy.deepcopy(base)
        if change:
            change(doc)
        c.expect_invalid("hardware-profile.schema.json", doc, f"profile with {what}")
        f = c.work / "profile-mutated.json"
        f.write_text(json.dumps(doc))
        if mme_accepts_profiles(c, f):
            c.fail(f"mme loads a profile with {what}")
    print(f"{len(files)} profile files: {loaded} loaded and valid, {refused_both} refused by both, "
          f"{refused_by_mme_only} refused by mme only (rules across keys or files); {len(mutations)} mutations")


GROUPS = {name[len("group_"):]: fn for name, fn in globals().items() if name.startswith("group_")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mme", required=True)
    ap.add_argument("--schemas", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("group", choices=sorted(GROUPS))
    args = ap.parse_args()
    c = Context(args)
    try:
        GROUPS[args.group](c)
    except Failure as e:
        c.fail(str(e))
    print(f"{args.group}: {c.checked} checks, {len(c.failures)} failures (jsonschema {jsonschema_version()})")
    return 1 if c.failures else 0


def jsonschema_version():
    try:
        from importlib.metadata import version
        return version("jsonschema")
    except Exception:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
