"""What a real user hit (issue 22, item 3), one test per fix, on a pico model.

eval's progress; checkpoint retention (``keep_checkpoints``); a foreign tokenizer caught by its vocabulary,
not by two ids; numbers range-checked before anything is written; 1-based steps; the GGUF import's
progress in a log; rank 0 alone prints the summary; saved weights follow the umask; every ``sar`` and
``model import-gguf`` key has ``--help`` text; the TRL extra in the quick start.
"""

import argparse
import dataclasses
import io
import json
import os
import sys
import typing
from pathlib import Path

import pytest

from shiftkit.cli import main
from shiftkit.errors import ShiftkitError
from shiftkit.models import TinyModelSpec, make_char_tokenizer, make_tiny_model, save_model

ROOT = Path(__file__).resolve().parents[2]
RL_FAST = ["tasks=add:1", "prompts_per_step=2", "group_size=2", "max_new_tokens=4", "threads=1", "progress=false",
           "eval_every=0", "samples_every=0"]


def _one_line(capsys, argv, pattern):
    assert main(argv) == 2
    lines = [x for x in capsys.readouterr().err.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and pattern in lines[0], lines
    return lines[0]


# ---- shiftkit eval shows progress -------------------------------------------------------------------

def test_eval_prints_periodic_lines_in_a_log(pico_dir, capsys):
    """stderr is no terminal here: plain lines that count the completions (greedy + samples), no carriage returns."""
    assert main(["eval", "--model", str(pico_dir), "tasks=add:1", "n=4", "samples=3", "max_new_tokens=3",
                 "batch_size=4", "threads=1"]) == 0
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("eval model: completions")]
    assert "\r" not in err and lines, err
    assert lines[-1].startswith("eval model: completions 16/16")  # 4 greedy + 4 x 3 samples
    assert main(["eval", "--model", str(pico_dir), "tasks=add:1", "n=4", "max_new_tokens=3", "threads=1",
                 "progress=false"]) == 0
    assert "completions" not in capsys.readouterr().err


def test_eval_shows_a_bar_on_a_terminal(pico_dir, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    from shiftkit.config import load_config
    from shiftkit.evaluate import ModelEvalConfig, run_eval

    run_eval(load_config(ModelEvalConfig, overrides=[f"model={pico_dir}", "tasks=add:1", "n=4", "max_new_tokens=3",
                                                     "batch_size=2", "threads=1"]))
    assert "\r" in term.getvalue() and "completions" in term.getvalue()  # tqdm redraws one line


# ---- keep_checkpoints ----------------------------------------------------------------------------------

@pytest.mark.parametrize("keep, kept", [(None, [3, 4]), (0, None), (-1, [1, 2, 3, 4]), (1, [4])])
def test_checkpoints_are_kept_by_keep_checkpoints_after_the_run(pico_dir, tmp_path, keep, kept):
    """save_every=1 over 5 steps writes step_1..step_4 (the last step is final/); the default keeps the last 2."""
    out = tmp_path / "r"
    argv = ["rl", "--model", str(pico_dir), *RL_FAST, "steps=5", "save_every=1", f"out={out}"]
    assert main(argv + ([] if keep is None else [f"keep_checkpoints={keep}"])) == 0
    assert (out / "DONE").exists()
    if kept is None:
        assert not (out / "checkpoints").exists()
    else:
        assert sorted(int(p.name[5:]) for p in (out / "checkpoints").iterdir()) == kept
        assert all((out / "checkpoints" / f"step_{s:06d}" / "trainer_state.pt").exists() for s in kept)


def test_keep_checkpoints_without_checkpoints_is_an_error(pico_dir, tmp_path, capsys):
    _one_line(capsys, ["rl", "--model", str(pico_dir), *RL_FAST, "save_every=0", "keep_checkpoints=3",
                       f"out={tmp_path / 'r'}"], "keep_checkpoints=3 is only read with checkpoints (save_every > 0)")
    assert not (tmp_path / "r").exists()


# ---- a foreign tokenizer is caught by its vocabulary, not two ids ------------------------------------------

SMALL = TinyModelSpec(hidden_size=16, num_hidden_layers=1, intermediate_size=32, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=8)


def test_a_tokenizer_far_smaller_than_the_embedding_is_foreign(tmp_path, capsys):
    """The reported case: a 100-token tokenizer whose bos/eos ids (1, 2) equal the model's config, on a
    model with a real-size vocabulary; nothing but the sizes tells them apart."""
    tok = make_char_tokenizer()
    m = make_tiny_model(SMALL, vocab_size=4000)
    assert (m.config.bos_token_id, m.config.eos_token_id) == (tok.bos_token_id, tok.eos_token_id)
    save_model(m, tok, tmp_path / "m")
    _one_line(capsys, ["eval", "--model", str(tmp_path / "m"), "tasks=add:1", "n=2", "max_new_tokens=2"],
              "has 100 tokens but the model embeds 4000")


def test_a_same_size_tokenizer_with_another_token_map_is_foreign(tmp_path, capsys):
    """Same size, same special ids, two tokens' ids swapped: the hash of the token -> id map recorded at
    save time (config.json shiftkit_vocab) differs."""
    tok = make_char_tokenizer()
    save_model(make_tiny_model(SMALL, vocab_size=len(tok)), tok, tmp_path / "m")
    assert json.loads((tmp_path / "m" / "config.json").read_text())["shiftkit_vocab"]["size"] == 100
    assert main(["eval", "--model", str(tmp_path / "m"), "tasks=add:1", "n=2", "max_new_tokens=2"]) == 0
    capsys.readouterr()
    f = tmp_path / "m" / "tokenizer.json"
    tj = json.loads(f.read_text())
    v = tj["model"]["vocab"]
    v["a"], v["b"] = v["b"], v["a"]
    f.write_text(json.dumps(tj))
    line = _one_line(capsys, ["eval", "--model", str(tmp_path / "m"), "tasks=add:1", "n=2", "max_new_tokens=2"],
                     "is not the one the model was saved with")
    assert "100 tokens" in line and "shiftkit_vocab" in line


# ---- numbers are range-checked before anything is written ---------------------------------------------------

def test_a_negative_lr_fails_before_a_model_loads_or_a_file_is_written(tmp_path, capsys):
    """The model path does not exist: the range error comes first, and out/ is never created."""
    line = _one_line(capsys, ["rl", "--model", str(tmp_path / "no_model"), "lr=-1e-5", f"out={tmp_path / 'r'}"],
                     "config key 'lr': -1e-05 is out of range; it must be positive")
    assert not (tmp_path / "r").exists() and "no_model" not in line
    for argv, msg in [(["eval", "--model", "m", "top_p=1.5"], "'top_p': 1.5 is out of range; it must be in (0, 1]"),
                      (["sft", "steps=0"], "'steps': 0 is out of range; it must be positive"),
                      (["opd", "--student", "s", "--teacher", "t", "--teacher-ref", "r", "kl_coef=nan"], "'kl_coef': nan"),
                      (["sar", "merge", "density=0"], "'density': 0.0 is out of range; it must be in (0, 1]"),
                      (["rl", "--model", "m", "reward_weights=1,inf"], "'reward_weights': inf")]:
        _one_line(capsys, argv, msg)


def test_opd_stage_numbers_obey_the_same_ranges():
    from shiftkit.opd.loop import OPDConfig

    with pytest.raises(ShiftkitError, match="'lr': -0.1 is out of range"):
        OPDConfig(student="s", stages=[{"teacher": "t", "teacher_ref": "r", "lr": -0.1}]).validate()


def _config_classes() -> list[type]:
    from shiftkit.cli import _experiments, build_parser
    from shiftkit.cliargs import config_class

    def leaves(p):
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            yield p
        for a in subs:
            for sp in a.choices.values():
                yield from leaves(sp)

    out = [config_class(p.get_default("config_class")) for p in leaves(build_parser()) if p.get_default("config_class")]
    for fn in _experiments().values():  # each experiment's config: the dataclasses its module defines
        mod = sys.modules[fn.__module__]
        out += [c for c in vars(mod).values() if dataclasses.is_dataclass(c) and c.__module__ == mod.__name__
                and c.__name__.endswith("Config")]
    return out


def test_every_numeric_key_of_every_command_has_a_range_its_default_obeys():
    """A new int/float key needs its rule in shiftkit.config.RANGES (declared once, for every config)."""
    from shiftkit.config import check_ranges, range_rule

    classes = _config_classes()
    assert len(classes) >= 24
    missing = []
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            t = hints[f.name]
            args = typing.get_args(typing.get_args(t)[0]) if typing.get_origin(t) is list else typing.get_args(t)
            if (t in (int, float) or any(a in (int, float) for a in args)) and range_rule(cls, f.name) is None:
                missing.append(f"{cls.__name__}.{f.name}")
        check_ranges(cls())  # the defaults obey the rules
    assert not missing, f"numeric keys without a rule in shiftkit.config.RANGES: {missing}"


def test_range_rules_by_hand():
    from shiftkit.config import in_range

    assert in_range(1e-9, "> 0") and not in_range(0.0, "> 0") and in_range(0.0, ">= 0")
    assert in_range(-1, ">= -1") and not in_range(-2, ">= -1")
    assert in_range(1.0, "(0, 1]") and not in_range(0.0, "(0, 1]") and not in_range(1.0, "[0, 1)")
    assert in_range(-5.0, "finite") and not in_range(float("inf"), "finite") and not in_range(float("nan"), ">= 0")


# ---- steps are 1-based: the updates done ------------------------------------------------------------------------

def test_steps_are_counted_the_same_in_metrics_samples_checkpoints_and_log_lines(pico_dir, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["rl", "--model", str(pico_dir), "tasks=add:1", "prompts_per_step=2", "group_size=2", "max_new_tokens=4",
                 "threads=1", "steps=2", "eval_every=2", "eval_n=2", "samples_every=1", "samples_n=1", "save_every=1",
                 "keep_checkpoints=-1", f"out={out}"]) == 0  # progress on: log lines, stderr being no terminal
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert "loss" not in rows[0] and "eval/greedy_acc" in rows[0] and "eval/greedy_acc" in rows[2]  # before/after
    assert [json.loads(x)["step"] for x in (out / "samples.jsonl").read_text().splitlines()] == [1, 2]
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["step_000001"]  # 1 update done; step 2 is final/
    err = capsys.readouterr().err
    assert "grpo r: step 1/2" in err and "grpo r: step 2/2" in err


# ---- the GGUF import's progress in a log ----------------------------------------------------------------------

def test_gguf_import_progress_is_lines_in_a_log(capsys):
    """transformers de-quantizes a GGUF checkpoint's tensors under ``tqdm(reader.tensors, ...)`` in
    modeling_gguf_pytorch_utils (transformers 5.x); inside gguf_progress that name counts in lines."""
    import inspect

    from transformers import modeling_gguf_pytorch_utils as g

    from shiftkit.models import gguf_progress

    assert "tqdm(reader.tensors" in inspect.getsource(g.load_gguf_checkpoint)  # the call gguf_progress reroutes
    with gguf_progress():
        got = list(g.tqdm(range(200), desc="Converting and de-quantizing GGUF tensors..."))
    assert got == list(range(200))
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "\r" not in err and len(lines) == 20
    assert lines[-1].startswith("import-gguf: Converting and de-quantizing GGUF tensors: tensors 200/200")
    assert g.tqdm.__module__.startswith("tqdm")  # restored


# ---- rank 0 alone prints the summary -------------------------------------------------------------------------

def test_only_rank_0_prints_the_summary(monkeypatch, capsys):
    from shiftkit.cliargs import print_summary

    args = argparse.Namespace(json=False)
    monkeypatch.setenv("RANK", "1")
    assert print_summary({"steps": 3}, args) == {"steps": 3}
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("RANK", "0")
    print_summary({"steps": 3}, args)
    assert capsys.readouterr().err == "steps: 3\n"


# ---- saved weights follow the umask --------------------------------------------------------------------------

def test_saved_model_files_follow_the_umask(tmp_path):
    tok = make_char_tokenizer()
    old = os.umask(0o022)
    try:
        save_model(make_tiny_model(SMALL, vocab_size=len(tok)), tok, tmp_path / "m")
        files = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "m").iterdir()}
        assert files["model.safetensors"] == 0o644 and set(files.values()) == {0o644}, files
        assert (tmp_path / "m").stat().st_mode & 0o777 == 0o755
        os.umask(0o027)
        save_model(make_tiny_model(SMALL, vocab_size=len(tok)), tok, tmp_path / "g")
        assert (tmp_path / "g" / "model.safetensors").stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)


# ---- --help text for every key of sar and model import-gguf ------------------------------------------------------

@pytest.mark.parametrize("command", ["sar extract", "sar apply", "sar merge", "sar sweep", "sar export-peft",
                                     "model import-gguf"])
def test_every_key_has_help_text(command):
    from shiftkit.cli import build_parser
    from shiftkit.cliargs import config_class
    from shiftkit.config import field_docs

    p = build_parser()
    for word in command.split():
        p = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
    cls = config_class(p.get_default("config_class"))
    docs = field_docs(cls)
    assert [f.name for f in dataclasses.fields(cls) if not docs.get(f.name)] == []
    help_lines = p.format_help().splitlines()
    for f in dataclasses.fields(cls):  # each key=default line of --help carries its text
        i = next(i for i, x in enumerate(help_lines) if x.strip().startswith(f"{f.name}="))
        assert docs[f.name] in " ".join(help_lines[i:i + 2]), f.name


# ---- the TRL extra in the quick start ------------------------------------------------------------------------------

def test_quick_start_installs_the_trl_extra():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    readme = (ROOT / "README.md").read_text()
    quick = readme[readme.index("## Quick start"):readme.index("\n## ", readme.index("## Quick start") + 5)]
    assert "trl" in extras and "pip install -e '.[trl]'" in quick
