"""The user's model, data and reward through every command (issue 12), on a pico model.

The CLI contract (rl / eval / sft with a data file, a column mapping, a built-in or user reward, the
chat template), bad input (one line, exit 2, nothing written), and the "what bit the new user" fixes.
The opd half of the contract is in tests/opd/test_cli.py (it needs the teacher trio).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shiftkit.cli import main
from shiftkit.models import load_model_and_tokenizer, save_model

CHAT = ("{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}<eos>{% endfor %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}")
FAST = ["steps=2", "prompts_per_step=2", "group_size=2", "max_new_tokens=6", "threads=1", "progress=false"]


@pytest.fixture(scope="module")
def chat_dir(tmp_path_factory, pico_dir):
    """The pico model with a chat template on its tokenizer."""
    model, tok = load_model_and_tokenizer(pico_dir)
    tok.chat_template = CHAT
    d = tmp_path_factory.mktemp("chat") / "model"
    save_model(model, tok, d)
    return d


@pytest.fixture(scope="module")
def wp(tmp_path_factory):
    d = tmp_path_factory.mktemp("wp")
    (d / "train.jsonl").write_text("".join(json.dumps({"question": f"{a}+{a}=", "answer": str(2 * a), "id": a}) + "\n"
                                           for a in range(1, 7)))
    (d / "test.jsonl").write_text("".join(json.dumps({"question": f"{a}+1=", "answer": str(a + 1)}) + "\n"
                                          for a in range(1, 4)))
    (d / "sft.jsonl").write_text("".join(json.dumps({"prompt": f"{a}+{a}=", "completion": str(2 * a)}) + "\n"
                                         for a in range(1, 7)))
    (d / "msgs.jsonl").write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"{a}+{a}="},
                                                                   {"role": "assistant", "content": str(2 * a)}]})
                                          + "\n" for a in range(1, 7)))
    (d / "shiftkit_test_ud_rewards.py").write_text(
        "import os\n"
        "def half(prompts, completions, answer, **kw):\n"
        "    return [0.5 for _ in completions]\n"
        "def ones(prompts, completions, **kw):\n"
        "    return [1.0 for _ in completions]\n"
        "def zeros(prompts, completions, **kw):\n"
        "    return [0.0 for _ in completions]\n"
        "def boom(prompts, completions, **kw):\n"
        "    raise RuntimeError('kaput')\n"
        "def boom_later(prompts, completions, trainer_state, **kw):\n"
        "    if trainer_state.global_step >= 2 and os.path.exists(os.environ['BOOM_FLAG']):\n"
        "        raise RuntimeError('killed')\n"
        "    return [0.0 for _ in completions]\n")
    return d


def _rows(p: Path) -> list[dict]:
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def _one_line(capsys, argv, pattern, out=None):
    capsys.readouterr()
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [x for x in err.strip().splitlines() if x.strip()]
    assert rc == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert pattern in lines[0], lines[0]
    if out is not None:
        assert not (Path(out) / "config.json").exists(), "a failed start wrote config.json"
    return lines[0]


# ------------------------------------------------------------------------------ the CLI contract

def test_rl_on_user_data_with_math_reward(pico_dir, wp, tmp_path, capsys):
    out = tmp_path / "rl"
    rc = main(["rl", "--model", str(pico_dir), f"data={wp / 'train.jsonl'}", "prompt_key=question",
               "answer_key=answer", "reward=math", *FAST, "samples_every=1", "samples_n=3", f"out={out}"])
    assert rc == 0, capsys.readouterr().err
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["data"] == str(wp / "train.jsonl") and cfg["reward"] == ["math"] and cfg["tasks"] == []
    m = _rows(out / "metrics.jsonl")
    assert [r["step"] for r in m] == [1, 2] and "rewards/math/mean" in m[0]
    assert not any(k.startswith("eval/") for r in m for k in r)  # no toy-arith eval on user data
    s = _rows(out / "samples.jsonl")
    assert [r["step"] for r in s] == [1, 1, 1, 2, 2, 2]
    questions = {f"{a}+{a}=" for a in range(1, 7)}
    assert all(r["prompt"] in questions and isinstance(r["completion"], str) and "advantage" in r and "reward" in r
               for r in s)


def test_rl_user_reward_by_import_path(pico_dir, wp, tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(wp))
    out = tmp_path / "rl"
    rc = main(["rl", "--model", str(pico_dir), f"data={wp / 'train.jsonl'}", "prompt_key=question",
               "reward=shiftkit_test_ud_rewards:half", *FAST, f"out={out}"])
    assert rc == 0, capsys.readouterr().err
    m = _rows(out / "metrics.jsonl")
    assert all(r["reward"] == 0.5 and r["rewards/half/mean"] == 0.5 for r in m)


def test_eval_contract_json_and_files(pico_dir, wp, tmp_path):
    out = tmp_path / "ev"
    p = subprocess.run([sys.executable, "-m", "shiftkit", "eval", "--model", str(pico_dir),
                        f"data={wp / 'test.jsonl'}", "prompt_key=question", "answer_key=answer", "reward=math",
                        "samples=4", "temperature=0.7", "top_p=0.95", "max_new_tokens=6", f"out={out}", "--json"],
                       capture_output=True, text=True, timeout=300,
                       env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(p.stdout)
    for k in ("greedy_acc", "avg@4", "pass@1", "pass@2", "pass@4", "response_length/mean", "truncation_rate",
              "greedy_truncation_rate", "n_problems"):
        assert k in res, k
    assert res["n_problems"] == 3
    rows = _rows(out / "problems.jsonl")
    assert len(rows) == 3 and all(len(r["samples"]) == 4 and "greedy" in r for r in rows)
    assert rows[0]["prompt"] == "1+1=" and rows[0]["answer"] == "2"
    assert json.loads((out / "summary.json").read_text())["avg@4"] == res["avg@4"]


@pytest.mark.parametrize("fn,want", [("ones", 1.0), ("zeros", 0.0)])
def test_eval_uses_the_user_reward(pico_dir, wp, monkeypatch, fn, want):
    from shiftkit.config import load_config
    from shiftkit.evaluate import ModelEvalConfig, run_eval

    monkeypatch.syspath_prepend(str(wp))
    cfg = load_config(ModelEvalConfig, overrides=[f"model={pico_dir}", f"data={wp / 'test.jsonl'}",
                                                  "prompt_key=question", f"reward=shiftkit_test_ud_rewards:{fn}", "samples=2",
                                                  "max_new_tokens=4", "threads=1"])
    res = run_eval(cfg)
    assert (res["greedy_acc"], res["avg@2"], res["pass@1"], res["pass@2"]) == (want, want, want, want)


def test_eval_arith_source_is_one_data_source(pico_dir):
    """data=arith:add:1 and tasks=add:1 are the same held-out set."""
    from shiftkit.config import load_config
    from shiftkit.evaluate import ModelEvalConfig, run_eval

    a = run_eval(load_config(ModelEvalConfig, overrides=[f"model={pico_dir}", "data=arith:add:1", "n=3",
                                                         "max_new_tokens=4", "threads=1"]))
    b = run_eval(load_config(ModelEvalConfig, overrides=[f"model={pico_dir}", "tasks=add:1", "n=3",
                                                         "max_new_tokens=4", "threads=1"]))
    assert a["n_problems"] == 3 and a["greedy_acc"] == b["greedy_acc"] and "greedy_acc/add" in a


def test_sft_prompt_completion_rows(pico_dir, wp, tmp_path, capsys):
    out = tmp_path / "sft"
    rc = main(["sft", "--model", str(pico_dir), f"data={wp / 'sft.jsonl'}", "steps=3", "batch_size=4", "lr=1e-3",
               "warmup=0", "threads=1", "progress=false", f"out={out}"])
    assert rc == 0, capsys.readouterr().err
    assert (out / "DONE").exists() and len(_rows(out / "metrics.jsonl")) == 3


def test_sft_messages_rows_through_the_chat_template(chat_dir, wp, tmp_path, capsys):
    from shiftkit.data import DataArgs, load_sft
    from shiftkit.prompts import PromptRenderer

    out = tmp_path / "sft"
    rc = main(["sft", "--model", str(chat_dir), f"data={wp / 'msgs.jsonl'}", "steps=2", "batch_size=2", "lr=1e-3",
               "warmup=0", "threads=1", "progress=false", f"out={out}"])
    assert rc == 0, capsys.readouterr().err
    _, tok = load_model_and_tokenizer(chat_dir)
    enc = PromptRenderer(tok).encode_sft(load_sft(DataArgs(data=str(wp / "msgs.jsonl"), shuffle=False)).items[0])
    assert tok.decode(enc.prompt_ids) == "[user]1+1=<eos>[assistant]" and tok.decode(enc.completion_ids) == "2<eos>"


def test_rl_rollouts_see_the_chat_template(chat_dir, wp, tmp_path, capsys, monkeypatch):
    from shiftkit import loopkit
    from shiftkit.prompts import PromptRenderer

    seen = []
    real = loopkit.sample

    def spy(model, tok, prompts=None, **kw):
        seen.append(kw.get("prompt_ids") or [tok(p, add_special_tokens=False)["input_ids"] for p in prompts])
        return real(model, tok, prompts, **kw)

    monkeypatch.setattr(loopkit, "sample", spy)
    out = tmp_path / "rl"
    rc = main(["rl", "--model", str(chat_dir), f"data={wp / 'train.jsonl'}", "prompt_key=question", *FAST,
               "samples_every=1", f"out={out}"])
    assert rc == 0, capsys.readouterr().err
    _, tok = load_model_and_tokenizer(chat_dir)
    first = _rows(out / "samples.jsonl")[0]["prompt"]  # the prompt column stays the user's text
    assert seen[0][0] == PromptRenderer(tok).ids(first)  # the sampler got the chat-rendered ids
    assert tok.decode(seen[0][0]) == f"[user]{first}<eos>[assistant]"


# ------------------------------------------------------------------------------ bad input

def test_bad_inputs_are_one_line_errors_and_write_nothing(pico_dir, chat_dir, wp, tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(wp))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    out = tmp_path / "run"
    rl = ["rl", "--model", str(pico_dir), *FAST, f"out={out}"]
    data = f"data={wp / 'train.jsonl'}"
    line = _one_line(capsys, [*rl, data], "no column 'prompt'", out)  # the default prompt_key
    assert "question" in line and "answer" in line  # the columns present are listed
    _one_line(capsys, [*rl, data, "prompt_key=question", "answer_key=solution"], "no column 'solution'", out)
    (tmp_path / "empty.jsonl").write_text("\n")
    _one_line(capsys, [*rl, f"data={tmp_path / 'empty.jsonl'}"], "is empty", out)
    t0 = time.time()
    _one_line(capsys, [*rl, "data=nobody/not-cached-here"], str(tmp_path / "hub"), out)
    assert time.time() - t0 < 20  # no network retries
    _one_line(capsys, [*rl, data, "prompt_key=question", "reward=no_such_mod:fn"], "no_such_mod", out)
    _one_line(capsys, [*rl, data, "prompt_key=question", "reward=shiftkit_test_ud_rewards:boom"], "kaput", out)
    _one_line(capsys, [*rl, data, "prompt_key=question", "chat_template=true"], "no chat template", out)
    # the same through eval and sft
    ev = ["eval", "--model", str(pico_dir), f"out={out}"]
    _one_line(capsys, [*ev, data], "no column 'prompt'", out)
    _one_line(capsys, [*ev, data, "prompt_key=question", "reward=shiftkit_test_ud_rewards:boom"], "kaput", out)
    _one_line(capsys, [*ev, "data=nobody/not-cached-here"], "not in the local cache", out)
    sft = ["sft", "--model", str(pico_dir), "steps=1", f"out={out}"]
    _one_line(capsys, [*sft, f"data={wp / 'msgs.jsonl'}"], "chat template", out)  # messages need a template
    _one_line(capsys, [*sft, data], "SFT rows need", out)
    assert not out.exists()


# ------------------------------------------------------------------------------ what bit the new user

def test_keys_the_run_does_not_read_are_errors(pico_dir, wp, tmp_path, capsys):
    out = tmp_path / "r"
    data = f"data={wp / 'train.jsonl'}"
    rl = ["rl", "--model", str(pico_dir), *FAST, "steps=1", f"out={out}"]  # (a mutant that trains stays quick)
    _one_line(capsys, [*rl, data, "prompt_key=question", "eval_n=5"], "does not read eval_n", out)
    _one_line(capsys, [*rl, "tasks=add", "prompt_key=question"], "does not read prompt_key", out)
    _one_line(capsys, [*rl, "tasks=add", data], "not both", out)
    _one_line(capsys, ["sft", "--model", str(pico_dir), f"data={wp / 'sft.jsonl'}", "error_rate=0.1", "steps=1",
                       f"out={out}"], "does not read error_rate", out)
    _one_line(capsys, ["eval", "--model", str(pico_dir), data, "n=5", "max_new_tokens=2"], "does not read n")


@pytest.fixture(scope="module")
def truncated_dir(tmp_path_factory, pico_dir):
    d = tmp_path_factory.mktemp("trunc") / "model"
    model, tok = load_model_and_tokenizer(pico_dir)
    save_model(model, tok, d)
    f = d / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    return d


def test_truncated_checkpoint_is_one_line_in_every_command(truncated_dir, wp, tmp_path, capsys):
    out = tmp_path / "r"
    m = str(truncated_dir)
    data = f"data={wp / 'train.jsonl'}"
    for argv in (["sft", "--model", m, f"data={wp / 'sft.jsonl'}"], ["rl", "--model", m, data, "prompt_key=question"],
                 ["eval", "--model", m, data, "prompt_key=question"],
                 ["opd", "--student", m, "--teacher", m, "--teacher-ref", m, data, "prompt_key=question"]):
        _one_line(capsys, [*argv, f"out={out}"], "cannot load model", out)
    assert not out.exists()


def test_tokenizer_of_another_model_is_refused(pico_dir, wp, tmp_path, capsys):
    d = tmp_path / "m"
    model, tok = load_model_and_tokenizer(pico_dir)
    model.config.eos_token_id = 7
    model.generation_config.eos_token_id = 7
    save_model(model, tok, d)
    for argv in (["sft", "--model", str(d), f"data={wp / 'sft.jsonl'}"],
                 ["rl", "--model", str(d), f"data={wp / 'train.jsonl'}", "prompt_key=question"]):
        _one_line(capsys, [*argv, f"out={tmp_path / 'r'}"], "does not belong to the model", tmp_path / "r")


def test_uncached_hub_model_fails_fast_with_the_cache_path(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    t0 = time.time()
    _one_line(capsys, ["eval", "--model", "nobody/no-such-model", "data=arith:add"], str(tmp_path / "hub"))
    assert time.time() - t0 < 20


def test_out_over_a_foreign_directory_is_refused(pico_dir, wp, tmp_path, capsys):
    mine = tmp_path / "my_stuff"
    mine.mkdir()
    (mine / "notes.txt").write_text("precious")
    argv = ["rl", "--model", str(pico_dir), f"data={wp / 'train.jsonl'}", "prompt_key=question", *FAST]
    _one_line(capsys, [*argv, f"out={mine}"], "not a shiftkit output", mine)
    assert (mine / "notes.txt").read_text() == "precious"
    assert main([*argv, f"out={mine}", "overwrite=true"]) == 0 and not (mine / "notes.txt").exists()


def test_sar_merge_refuses_an_existing_out(tmp_path, capsys):
    out = tmp_path / "merged"
    out.mkdir()
    (out / "x").write_text("keep")
    _one_line(capsys, ["sar", "merge", "--base", str(tmp_path / "b"), "--experts", str(tmp_path / "e"),
                       "--out", str(out)], "overwrite=true")
    assert (out / "x").read_text() == "keep"


def test_finished_run_with_more_steps_and_resume_messages(pico_dir, wp, tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(wp))
    flag = tmp_path / "flag"
    monkeypatch.setenv("BOOM_FLAG", str(flag))
    out = tmp_path / "r"
    argv = ["rl", "--model", str(pico_dir), f"data={wp / 'train.jsonl'}", "prompt_key=question",
            "reward=shiftkit_test_ud_rewards:boom_later", "prompts_per_step=2", "group_size=2", "max_new_tokens=4", "threads=1",
            "progress=false", "save_every=1", f"out={out}"]
    flag.write_text("1")
    _one_line(capsys, [*argv, "steps=3"], "killed")  # a crash in step 2, after the step-2 checkpoint
    assert (out / "checkpoints" / "step_000002").is_dir()
    flag.unlink()
    assert main([*argv, "steps=3"]) == 0
    assert "resuming" in (err := capsys.readouterr().err) and "after step 2" in err
    assert main([*argv, "steps=3"]) == 0
    assert "already finished" in capsys.readouterr().err
    _one_line(capsys, [*argv, "steps=5"], "already finished (3 steps)")


def test_real_model_defaults_and_toy_values_in_recipes():
    from shiftkit.evaluate import ModelEvalConfig
    from shiftkit.opd.loop import OPDConfig
    from shiftkit.recipes.common import TOY_RL
    from shiftkit.recipes.demo import DemoConfig
    from shiftkit.recipes.world import WorldConfig
    from shiftkit.rl import GRPOConfig
    from shiftkit.sft import SFTConfig

    assert SFTConfig().lr == 2e-5 and 512 <= GRPOConfig().max_new_tokens <= 1024 and GRPOConfig().lr <= 1e-5
    assert SFTConfig().save_every > 0 and GRPOConfig().save_every > 0 and OPDConfig().save_every > 0
    assert GRPOConfig().tasks == [] and SFTConfig().tasks == [] and ModelEvalConfig().tasks == []
    assert (TOY_RL["lr"], TOY_RL["max_new_tokens"]) == (6e-5, 48) and DemoConfig().rl_lr == 6e-5
    assert WorldConfig().lr == 3e-3


def test_help_lists_every_key_with_default_and_meaning():
    from shiftkit.config import field_docs
    from shiftkit.rl import GRPOConfig

    p = subprocess.run([sys.executable, "-m", "shiftkit", "rl", "--help"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0
    import dataclasses

    for f in dataclasses.fields(GRPOConfig):
        assert f"  {f.name}=" in p.stdout, f.name
    assert "max_new_tokens=1024" in p.stdout and field_docs(GRPOConfig)["max_new_tokens"] in p.stdout
    for cmd in (["sft"], ["eval"], ["opd"], ["sar", "merge"]):
        q = subprocess.run([sys.executable, "-m", "shiftkit", *cmd, "--help"], capture_output=True, text=True,
                           timeout=120)
        assert q.returncode == 0 and "config keys of" in q.stdout, cmd


# ------------------------------------------------------------------------------ seeing what the model does

def test_progress_is_line_based_off_a_terminal(pico_dir, wp, tmp_path):
    p = subprocess.run([sys.executable, "-m", "shiftkit", "rl", "--model", str(pico_dir),
                        f"data={wp / 'train.jsonl'}", "prompt_key=question", *FAST[:-1], f"out={tmp_path / 'r'}"],
                       capture_output=True, text=True, timeout=300,
                       env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
    assert "\r" not in p.stderr and "step 2/2" in p.stderr


def test_report_to_needs_its_package_or_logs(pico_dir, wp, tmp_path, capsys):
    import importlib.util

    argv = ["rl", "--model", str(pico_dir), f"data={wp / 'train.jsonl'}", "prompt_key=question", *FAST,
            f"out={tmp_path / 'r'}", "report_to=tensorboard"]
    if importlib.util.find_spec("accelerate") is None or not any(
            importlib.util.find_spec(m) for m in ("tensorboard", "tensorboardX")):
        _one_line(capsys, argv, "pip install", tmp_path / "r")
        pytest.skip("tensorboard/accelerate not installed: the missing-package error was checked")
    assert main(argv) == 0
    events = list((tmp_path / "r" / "tensorboard").rglob("events.*"))
    assert events
    blob = b"".join(e.read_bytes() for e in events)
    rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    scalars = {k for r in rows if "loss" in r for k, v in r.items() if isinstance(v, (int, float)) and k != "step"}
    assert {"reward", "loss", "grad_norm"} <= scalars  # (entropy, rollout/logprob_gap: on steps whose update ran)
    for tag in sorted(scalars):  # every metrics.jsonl scalar of a training step reaches the tracker
        assert tag.encode() in blob, tag


def test_wandb_missing_is_a_clear_error(pico_dir, wp, tmp_path, capsys):
    import importlib.util

    if importlib.util.find_spec("wandb") is not None and importlib.util.find_spec("accelerate") is not None:
        pytest.skip("wandb installed")
    _one_line(capsys, ["rl", "--model", str(pico_dir), f"data={wp / 'train.jsonl'}", "report_to=wandb",
                       f"out={tmp_path / 'r'}"], "pip install", tmp_path / "r")


def test_eval_with_the_aime_config_on_a_cached_dataset(pico_dir, tmp_path, monkeypatch, capsys):
    """`shiftkit eval --model M --config configs/eval/aime.yaml` on a (fake) cached copy of the dataset:
    the papers' protocol keys are the eval command's keys; only the length and K are shrunk here."""
    pytest.importorskip("datasets")
    repo = "Maxwell-Jia/AIME_2024"
    folder = tmp_path / "hub" / ("datasets--" + repo.replace("/", "--"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    snap = folder / "snapshots" / commit / "data"
    snap.mkdir(parents=True)
    (snap / "train.jsonl").write_text("".join(json.dumps({"ID": f"2024-I-{i}", "Problem": f"What is {i}+{i}?",
                                                          "Answer": 2 * i}) + "\n" for i in range(1, 4)))
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    aime = Path(__file__).resolve().parents[2] / "configs" / "eval" / "aime.yaml"
    out = tmp_path / "ev"
    rc = main(["eval", "--model", str(pico_dir), "--config", str(aime), "samples=2", "max_new_tokens=4", "threads=1",
               f"out={out}", "--json"])
    assert rc == 0, capsys.readouterr().err
    s = json.loads((out / "summary.json").read_text())
    assert s["n_problems"] == 3 and "avg@2" in s and s["data"].startswith(repo) and "template dapo" in s["prompts"]
    rows = _rows(out / "problems.jsonl")
    assert rows[0]["answer"] == "2" and len(rows[0]["samples"]) == 2


def test_line_progress_by_hand():
    import io

    from shiftkit.io import LineProgress, progress_bar

    buf = io.StringIO()
    assert isinstance(progress_bar(10, 0, "x", buf), LineProgress)  # a StringIO is no terminal
    bar = LineProgress(40, 0, "sft", buf)  # every 40 // 20 = 2 steps
    for i in range(40):
        bar.set_postfix(loss=f"{i:.1f}")
        bar.update(1)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 20 and "\r" not in buf.getvalue()
    assert lines[0].startswith("sft: step 2/40") and lines[-1].startswith("sft: step 40/40") and "loss=39.0" in lines[-1]
    buf2 = io.StringIO()
    big = LineProgress(1000, 0, "pass@k", buf2)  # updates in chunks still cross the marks (every 50)
    for _ in range(4):
        big.update(256)
    assert len(buf2.getvalue().splitlines()) == 4
