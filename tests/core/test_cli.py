"""The command line: help, JSON summaries, and one-line errors (exit 2) on bad input."""

import json
import subprocess
import sys

import pytest

from shiftkit.cli import main
from shiftkit.models import TinyModelSpec, make_char_tokenizer, make_tiny_model, save_model


def run_cli(*args, timeout=300):
    p = subprocess.run([sys.executable, "-m", "shiftkit", *args], capture_output=True, text=True, timeout=timeout,
                       env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    return p.returncode, p.stdout, p.stderr


def test_help_lists_subcommands():
    rc, out, _ = run_cli("--help")
    assert rc == 0
    for cmd in ("world", "sft", "rl", "eval", "demo", "experiment"):
        assert cmd in out


def _one_line_error(rc, err, pattern):
    assert rc == 2
    lines = [l for l in err.strip().splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert pattern in lines[0], lines[0]


def test_unknown_config_key(pico_dir, capsys):
    rc = main(["rl", "--model", str(pico_dir), "lerning_rate=1"])
    _one_line_error(rc, capsys.readouterr().err, "unknown config key 'lerning_rate'")


def test_missing_model_directory(tmp_path, capsys):
    rc = main(["eval", "--model", str(tmp_path / "nope")])
    _one_line_error(rc, capsys.readouterr().err, "not found")


def test_tokenizer_vocab_mismatch(tmp_path, capsys):
    tok = make_char_tokenizer()
    m = make_tiny_model(TinyModelSpec(hidden_size=16, num_hidden_layers=1, intermediate_size=32, num_attention_heads=2,
                                      num_key_value_heads=1, head_dim=8), vocab_size=60)
    save_model(m, tok, tmp_path / "m")
    rc = main(["eval", "--model", str(tmp_path / "m")])
    _one_line_error(rc, capsys.readouterr().err, "tokenizer has 100 tokens but the model")


def test_empty_dataset(tmp_path, capsys):
    (tmp_path / "empty.jsonl").write_text("")
    rc = main(["sft", "init=weak", f"data={tmp_path / 'empty.jsonl'}", f"out={tmp_path / 'run'}"])
    _one_line_error(rc, capsys.readouterr().err, "is empty")
    assert not (tmp_path / "run" / "DONE").exists()


def test_no_data_source(pico_dir, capsys, tmp_path):
    rc = main(["rl", "--model", str(pico_dir), "tasks=[]", f"out={tmp_path / 'r'}"])
    _one_line_error(rc, capsys.readouterr().err, "rl needs data=")
    assert not (tmp_path / "r").exists()


def test_bad_config_file(tmp_path, capsys):
    f = tmp_path / "c.yaml"
    f.write_text("steps: [oops\n")
    rc = main(["sft", "--config", str(f)])
    _one_line_error(rc, capsys.readouterr().err, "cannot parse config file")


def test_eval_json_summary(pico_dir):
    rc, out, err = run_cli("eval", "--model", str(pico_dir), "tasks=add:1", "n=3", "samples=2", "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert res["n_problems"] == 3 and 0 <= res["greedy_acc"] <= 1 and "pass@2" in res


def test_flags_are_aliases_of_config_fields(tmp_path):
    """One grammar: a flag sets the config field of its name and wins over the config file."""
    from shiftkit.cli import build_parser, config_from_args
    from shiftkit.rl import GRPOConfig

    (tmp_path / "c.yaml").write_text("model: from_file\nsteps: 7\nout: o\n")
    parser = build_parser()
    a = parser.parse_args(["rl", "--config", str(tmp_path / "c.yaml"), "--model", "from_flag", "steps=9"])
    cfg = config_from_args(GRPOConfig, a)
    assert (cfg.model, cfg.steps, cfg.out) == ("from_flag", 9, "o")
    b = parser.parse_args(["rl", "model=from_override"])
    assert config_from_args(GRPOConfig, b).model == "from_override"
    c = parser.parse_args(["rl", "--model", "from_flag", "model=from_override"])
    assert config_from_args(GRPOConfig, c).model == "from_flag"  # a flag wins (as opd's flags always did)


def test_command_groups_and_experiments_are_listed():
    rc, out, _ = run_cli("agent", "--help")
    assert rc == 0 and all(c in out for c in ("run", "bench", "serve", "rft", "synth", "train"))
    rc, out, _ = run_cli("kernels", "--help")
    assert rc == 0 and "eval-set" in out and "synth" not in out  # the agent's commands left the kernels group
    rc, out, _ = run_cli("experiment", "--help")
    assert rc == 0 and all(n in out for n in ("weak-to-strong", "sar", "agent-toy"))


def test_demo_preset_is_a_config_field_under_the_overrides():
    from shiftkit.errors import ShiftkitError
    from shiftkit.recipes.demo import PRESETS, demo_config
    from shiftkit.recipes.world import WorldConfig

    assert demo_config(None, []).weak_steps == WorldConfig.weak_steps  # defaults referenced, not re-typed
    q = demo_config(None, ["preset=quick", "rl_steps=5"])
    assert q.preset == "quick" and q.rl_steps == 5 and q.weak_steps == PRESETS["quick"]["weak_steps"]
    with pytest.raises(ShiftkitError, match="unknown demo stage 'gpro'"):
        demo_config(None, ["stages=[world,gpro]"])


def test_every_command_names_its_config_class():
    """Each command that takes ``--config`` names its config dataclass (``"module:Class"``), which ``--help``
    lists; ``experiment`` picks its config by name (its experiments are listed instead)."""
    import argparse
    import dataclasses

    from shiftkit.cli import build_parser
    from shiftkit.cliargs import config_class

    def leaves(p, path=()):
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            yield path, p
        for a in subs:
            for name, sp in a.choices.items():
                yield from leaves(sp, (*path, name))

    named = {}
    for path, p in leaves(build_parser()):
        if "--config" in p._option_string_actions and path != ("experiment",):
            spec = p.get_default("config_class")
            assert spec, path
            named[path] = config_class(spec)
            assert dataclasses.is_dataclass(named[path]), path
    assert len(named) >= 20 and named[("rl",)].__name__ == "GRPOConfig" and named[("opd",)].__name__ == "OPDConfig"
