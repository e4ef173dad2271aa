"""SFT and GRPO loops: they run, learn, resume after a kill, and match under 2-process DDP."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from shiftkit.rl import GRPOConfig, run_grpo
from shiftkit.sft import SFTConfig, run_sft

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="session")
def add1_model(tmp_path_factory):
    """The weak spec SFT'd briefly on 1-digit addition: right often enough that GRPO has signal."""
    out = tmp_path_factory.mktemp("add1") / "sft"
    s = run_sft(SFTConfig(init="weak", out=str(out), tasks=["add:1"], steps=80, lr=1e-2, warmup=10,
                          error_rate=0.5, progress=False, threads=1))
    return s["out"]


def _weights(path) -> dict:
    return load_file(str(Path(path) / "model.safetensors"))


def _max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)


def test_sft_lowers_loss_and_writes_run_dir(tmp_path):
    s = run_sft(SFTConfig(init="weak", out=str(tmp_path / "r"), tasks=["add:1"], steps=30, lr=1e-2, warmup=5,
                          progress=False, threads=1))
    rows = [json.loads(l) for l in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(30))
    assert rows[-1]["loss"] < 0.6 * rows[0]["loss"]
    for f in ("config.json", "summary.json", "DONE", "final/config.json", "final/model.safetensors",
              "final/tokenizer.json"):
        assert (tmp_path / "r" / f).exists(), f
    assert s["out"].endswith("final")


def _grpo_cfg(model, out, **kw) -> GRPOConfig:
    base = dict(model=model, out=str(out), tasks=["add:1"], steps=6, prompts_per_step=4, group_size=4,
                max_new_tokens=12, lr=1e-3, eval_every=0, progress=False, threads=1)
    base.update(kw)
    return GRPOConfig(**base)


def test_grpo_updates_only_with_signal_and_logs(add1_model, tmp_path):
    run_grpo(_grpo_cfg(add1_model, tmp_path / "g"))
    rows = [json.loads(l) for l in (tmp_path / "g" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 6
    for k in ("reward", "response_len", "eos_rate", "entropy", "time/sample", "time/update", "frac_groups_with_signal"):
        assert k in rows[0]
    assert any(r["frac_groups_with_signal"] > 0 for r in rows)
    assert _max_diff(_weights(add1_model), _weights(tmp_path / "g" / "final")) > 0


def test_grpo_options_ppo_clip_kl_seq_mean(add1_model, tmp_path):
    run_grpo(_grpo_cfg(add1_model, tmp_path / "g", steps=2, clip_low=0.2, clip_high=0.28, ppo_epochs=2,
                       kl_coef=0.05, aggregation="seq_mean", adv_scale="none"))
    rows = [json.loads(l) for l in (tmp_path / "g" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["kl"] >= 0 for r in rows)


def test_grpo_kl_clamp_flag_reaches_the_kl_penalty(add1_model, tmp_path, monkeypatch):
    from shiftkit import losses
    from shiftkit.opd.loop import OPDConfig, grpo_config

    seen, real = [], losses.kl_penalty
    monkeypatch.setattr(losses, "kl_penalty", lambda *a, **k: seen.append(k.get("clamp")) or real(*a, **k))
    run_grpo(_grpo_cfg(add1_model, tmp_path / "on", steps=1, kl_coef=0.05))
    run_grpo(_grpo_cfg(add1_model, tmp_path / "off", steps=1, kl_coef=0.05, kl_clamp=False))
    assert seen == [True, False]
    assert grpo_config(OPDConfig(student="s", kl_clamp=False)).kl_clamp is False


def _cli(*args, **popen_kw):
    return subprocess.Popen([sys.executable, "-m", "shiftkit", *args], env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen_kw)


def test_kill_and_resume_gives_same_weights(add1_model, tmp_path):
    common = ["rl", "--model", add1_model, "tasks=add:1", "steps=14", "prompts_per_step=4", "group_size=4",
              "max_new_tokens=12", "lr=1e-3", "eval_every=0", "threads=1", "progress=false", "save_every=2"]
    ref = _cli(*common, f"out={tmp_path / 'ref'}")
    assert ref.wait(timeout=300) == 0, ref.stderr.read()
    # start, SIGKILL as soon as the first checkpoint exists, then resume with the same command
    p = _cli(*common, f"out={tmp_path / 'run'}")
    ck = tmp_path / "run" / "checkpoints"
    t0 = time.time()
    while not any(ck.glob("step_*/trainer_state.pt")):
        assert p.poll() is None and time.time() - t0 < 120, "run ended before its first checkpoint"
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert not (tmp_path / "run" / "DONE").exists(), "the run finished before it was killed"
    q = _cli(*common, f"out={tmp_path / 'run'}")
    assert q.wait(timeout=300) == 0, q.stderr.read()
    assert _max_diff(_weights(tmp_path / "ref" / "final"), _weights(tmp_path / "run" / "final")) == 0.0
    steps = [json.loads(l)["step"] for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(14))


def test_two_process_ddp_equals_one_process(add1_model, tmp_path):
    args = ["rl", "--model", add1_model, "tasks=add:1", "steps=3", "prompts_per_step=4", "group_size=4",
            "max_new_tokens=12", "lr=1e-3", "eval_every=0", "threads=1", "progress=false"]
    one = _cli(*args, f"out={tmp_path / 'one'}")
    assert one.wait(timeout=300) == 0, one.stderr.read()
    acc = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--main_process_port", "29517", "-m", "shiftkit", *args, f"out={tmp_path / 'two'}"]
    two = subprocess.run(acc, env={**ENV, "CUDA_VISIBLE_DEVICES": ""}, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    w0, w1, w2 = _weights(add1_model), _weights(tmp_path / "one" / "final"), _weights(tmp_path / "two" / "final")
    assert _max_diff(w0, w1) > 1e-4  # the run did update the model
    assert _max_diff(w1, w2) < 1e-5
