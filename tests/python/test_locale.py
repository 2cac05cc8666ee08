"""Numbers under a comma-decimal locale (issue 32). A Python program that calls
locale.setlocale(locale.LC_ALL, "de_DE.UTF-8") switched the C library to ',' as the decimal
point: mme then read a spec file's `hidden_dropout: 0.25` as 0 and a 5.315 GiB peak as 5.0.

The locale is the system's de_DE.UTF-8, or one built by localedef into a private LOCPATH (no
root). Neither available is a failure, never a skip: the test must run under such a locale."""

from __future__ import annotations

import locale
import os
import shutil
import subprocess

import pytest

import mme

SPEC = """model:
  num_layers: 4
  hidden_size: 256
  num_attention_heads: 8
  ffn_hidden_size: 1024
  vocab_size: 1000
  max_position_embeddings: 4096
  hidden_dropout: {dropout}
parallelism:
  tensor_model_parallel_size: 1
  pipeline_model_parallel_size: 1
training:
  micro_batch_size: 1
  seq_length: 1024
infrastructure:
  world_size: 8
"""

CSV = ("model,test_case,golden,max_alloc_GiB_max,alloc_GiB_median,nodes_gpus,num-layers,hidden-size,"
       "num-attention-heads,seq-length,max-position-embeddings,micro-batch-size,vocab-size,tokenizer-type\n"
       "gpt,tiny,dgx_h100,5.315,1.25,dgx_h100:1x8,4,256,8,1024,4096,1,1000,NullTokenizer\n")


@pytest.fixture(scope="module")
def comma_locale(tmp_path_factory) -> str:
    for name in ("de_DE.UTF-8", "de_DE.utf8"):
        try:
            locale.setlocale(locale.LC_ALL, name)
            return name
        except locale.Error:
            pass
        finally:
            locale.setlocale(locale.LC_ALL, "C")
    localedef = shutil.which("localedef")
    if not localedef:
        pytest.fail("no de_DE.UTF-8 and no localedef: install `locales` (scripts/setup-deps.sh)")
    folder = tmp_path_factory.mktemp("locale")
    source = folder / "comma.src"
    source.write_text('LC_NUMERIC\ndecimal_point "<U002C>"\nthousands_sep "<U002E>"\ngrouping 3;3\nEND LC_NUMERIC\n')
    # -c: the categories the source leaves out are a warning (exit 1), and the locale is written.
    done = subprocess.run([localedef, "-c", "-i", str(source), "-f", "UTF-8", str(folder / "mme_comma")],
                          capture_output=True, text=True)
    if done.returncode > 1:
        pytest.fail(f"localedef failed ({done.returncode}): {done.stderr}")
    os.environ["LOCPATH"] = str(folder)
    return "mme_comma"


def _results(tmp_path) -> tuple[dict, dict, dict]:
    (tmp_path / "spec.yaml").write_text(SPEC.format(dropout="0.25"))
    (tmp_path / "no-dropout.yaml").write_text(SPEC.format(dropout="0.0"))
    (tmp_path / "cases.csv").write_text(CSV)
    out = []
    for args, command in (({"config": str(tmp_path / "spec.yaml")}, "estimate"),
                          ({"config": str(tmp_path / "no-dropout.yaml")}, "estimate"),
                          ({"cases": str(tmp_path / "cases.csv")}, "validate")):
        r = mme.run_request({"command": command, "args": args})
        assert r["ok"], r
        out.append(r["result"])
    return out[0], out[1], out[2]


def test_numbers_read_the_same_under_a_comma_locale(comma_locale, tmp_path):
    in_c = _results(tmp_path)
    locale.setlocale(locale.LC_ALL, comma_locale)
    try:
        assert locale.localeconv()["decimal_point"] == ","
        in_comma = _results(tmp_path)
    finally:
        locale.setlocale(locale.LC_ALL, "C")
    assert in_comma == in_c
    dropout, no_dropout, validated = in_comma
    # The dropout masks are activations: 0.25 read as 0 would give the smaller no-dropout peak.
    assert dropout["peak"]["total_bytes"] > no_dropout["peak"]["total_bytes"]
    case = validated["cases"][0]
    assert case["status"] == "ok", case
    assert case["measured_peak_gib"] == 5.315 and case["measured_static_gib"] == 1.25
