"""Errors raise the class of the C++ error (framework/include/mme/sdk/error.hpp) with the CLI's
exit code and the message of its `mme: error:` line."""

from __future__ import annotations

import pickle

import pytest

import mme
from conftest import PLUGIN_DIR, run_cli


def _same_as_cli(cls: type, call, *cli_args: str) -> mme.Error:
    cli = run_cli(*cli_args)
    with pytest.raises(cls) as e:
        call()
    err = e.value
    assert isinstance(err, mme.Error)
    assert err.exit_code == cls.exit_code == cli.code
    assert err.message == cli.error_message() == str(err)
    return err


def test_usage_error_unknown_gpu():
    _same_as_cli(mme.UsageError, lambda: mme.estimate("Qwen/Qwen3-8B", gpu="H900"),
                 "estimate", "Qwen/Qwen3-8B", "--gpu", "H900")


def test_usage_error_bad_value():
    _same_as_cli(mme.UsageError, lambda: mme.estimate("Qwen/Qwen3-8B", tp=0), "estimate", "Qwen/Qwen3-8B", "--tp", "0")
    _same_as_cli(mme.UsageError, lambda: mme.estimate("Qwen/Qwen3-8B", recompute_granularity="sometimes"),
                 "estimate", "Qwen/Qwen3-8B", "--recompute-granularity", "sometimes")


def test_config_error_bad_json(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{ not json")
    _same_as_cli(mme.ConfigError, lambda: mme.estimate(bad), "estimate", str(bad))


def test_layout_error():
    err = _same_as_cli(mme.LayoutError,
                       lambda: mme.estimate("deepseek-ai/DeepSeek-V3", tp=3),
                       "estimate", "deepseek-ai/DeepSeek-V3", "--tp", "3")
    assert "mme plan" in err.message


def test_plugin_error(tmp_path):
    # The test plugin's adapter refuses this config with a PluginError; the CLI exits 5.
    cfg = tmp_path / "config.json"
    cfg.write_text('{"pytest_plugin_error": true, "model_type": "pytest"}')
    cli = run_cli("estimate", str(cfg), "--plugin-dir", PLUGIN_DIR)
    assert cli.code == 5, cli.err
    _same_as_cli(mme.PluginError, lambda: mme.estimate(cfg, plugin_dirs=[PLUGIN_DIR]),
                 "estimate", str(cfg), "--plugin-dir", PLUGIN_DIR)


def test_not_found_error(tmp_path):
    missing = str(tmp_path / "nowhere" / "config.json")
    _same_as_cli(mme.NotFoundError, lambda: mme.estimate(missing), "estimate", missing)
    _same_as_cli(mme.NotFoundError, lambda: mme.hardware(hardware_files=[str(tmp_path / "no.json")]),
                 "hardware", "--hardware-file", str(tmp_path / "no.json"))


def test_errors_of_the_other_commands():
    _same_as_cli(mme.UsageError, lambda: mme.plan("Qwen/Qwen3-8B", num_gpus=8, sort="size"),
                 "plan", "Qwen/Qwen3-8B", "--num-gpus", "8", "--sort", "size")
    _same_as_cli(mme.NotFoundError, lambda: mme.params("no-such-org/no-such-model"),
                 "params", "no-such-org/no-such-model")
    _same_as_cli(mme.UsageError, lambda: mme.validate(), "validate")


def test_error_classes_and_pickling():
    for cls, code in [(mme.InternalError, 1), (mme.UsageError, 2), (mme.ConfigError, 3), (mme.LayoutError, 4),
                      (mme.PluginError, 5), (mme.NotFoundError, 6)]:
        assert issubclass(cls, mme.Error) and cls.exit_code == code
        e = pickle.loads(pickle.dumps(cls("msg")))
        assert type(e) is cls and e.exit_code == code and e.message == "msg"


def test_bad_requests_of_the_c_entry_point():
    r = mme.run_request({"command": "estimate", "args": {"model": "Qwen/Qwen3-8B"}, "bogus": 1})
    assert not r["ok"] and r["exit_code"] == 2 and "unknown key 'bogus'" in r["error"]["message"]
    r = mme.run_request({"command": "estimat"})
    cli = run_cli("estimat")
    assert r["exit_code"] == cli.code == 2 and r["error"]["message"] == cli.error_message()
    r = mme.run_request({"api_version": 99, "command": "version"})
    assert r["exit_code"] == 2 and "api_version 99" in r["error"]["message"]
    r = mme.run_request({"command": "estimate", "args": {"model": "Qwen/Qwen3-8B", "tp": {"x": 1}}})
    assert r["exit_code"] == 2 and r["error"]["type"] == "UsageError"


# Issue 32: what Python writes into a request but JSON has not (NaN, Infinity, lone surrogates),
# integers beyond 64 bits, NUL characters and huge values: each named for what it is, the message
# bounded, never a JSON syntax error about a document the caller never wrote.
def _message(args: dict) -> tuple[int, str]:
    r = mme.run_request({"command": "estimate", "args": args})
    assert not r["ok"], r
    return r["exit_code"], r["error"]["message"]


def test_request_values_python_writes_but_json_has_not():
    for value in (float("nan"), float("inf"), float("-inf")):
        code, msg = _message({"model": "Qwen/Qwen3-8B", "hidden_dropout": value})
        assert code == 2
        assert msg.startswith("the request's args.hidden_dropout: NaN and Infinity are not numbers mme takes"), msg
    code, msg = _message({"model": "Qwen/Qwen3-8B\ud800"})
    assert code == 2
    assert msg == ("the request's args.model: a string holds a lone UTF-16 surrogate (\\ud800), "
                   "which is no Unicode character"), msg
    with pytest.raises(mme.UsageError, match="args.hidden[-_]dropout: NaN and Infinity"):
        mme.estimate("Qwen/Qwen3-8B", hidden_dropout=float("nan"))


def test_request_messages_are_exact_whole_and_bounded():
    code, msg = _message({"model": "Qwen/Qwen3-8B", "tp": 2**70})
    assert code == 2 and "1180591620717411303424" in msg and "e+21" not in msg, msg
    code, msg = _message({"model": "Qwen/Qwen3-8B\x00tail"})
    assert code == 2 and "Qwen/Qwen3-8B\\0tail" in msg and "NUL" in msg, msg
    code, msg = _message({"model": "org/" + "x" * (10 << 20)})
    assert code == 6 and len(msg) < 300 and f"is {(10 << 20) + 4} bytes long" in msg, msg[:300]
