"""Every training path on the machine's device: a few steps of SFT, GRPO (every memory key), Direct-OPD in
each reward mode (with top_q, grpo_weight and an off-policy epoch), vanilla OPD, the sampler and SAR
extract/apply/merge.

The same test bodies run twice: on CPU with pico models in every CI run (so the GPU check's code is itself
tested), and, marked ``gpu``, on CUDA with a SmolLM2-135M-shaped Llama (30 layers, hidden 576, vocabulary
49,152; random weights, no download), where each phase's wall time, tokens/s and peak CUDA memory are
written to ``$GPU_CHECK_OUT/loops.jsonl`` for ``scripts/gpu_check.sh``. The loops pick the device
themselves (``shiftkit.dist.Dist``: ``cuda:LOCAL_RANK`` when CUDA is available).
"""

import json
import os
import time
from pathlib import Path

import pytest
import torch

from shiftkit.models import TinyModelSpec, make_char_tokenizer, make_tiny_model, save_model

PICO = TinyModelSpec(arch="llama", hidden_size=32, num_hidden_layers=2, intermediate_size=64,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=8)
SMOLLM2_SHAPE = TinyModelSpec(arch="llama", hidden_size=576, num_hidden_layers=30, intermediate_size=1536,
                              num_attention_heads=9, num_key_value_heads=3, head_dim=64, max_position_embeddings=2048)

DEVICES = [pytest.param("cpu", id="cpu"),
           pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
               not torch.cuda.is_available(), reason="needs CUDA")])]


@pytest.fixture(scope="module", params=DEVICES)
def models(request, tmp_path_factory):
    dev = request.param
    if dev == "cpu" and torch.cuda.is_available():
        pytest.skip("the CPU variant runs on machines without CUDA (the loops would pick the GPU)")
    spec, vocab = (PICO, 100) if dev == "cpu" else (SMOLLM2_SHAPE, 49152)
    tok = make_char_tokenizer()
    root = tmp_path_factory.mktemp(f"models_{dev}")
    out = {"device": dev, "root": root}
    for name, seed in (("student", 0), ("teacher", 1), ("ref", 2)):
        save_model(make_tiny_model(spec, vocab_size=vocab, seed=seed), tok, root / name)
        out[name] = str(root / name)
    for i in (1, 2):  # "RL updates" of the reference for SAR: small low-rank-ish perturbations
        m = make_tiny_model(spec, vocab_size=vocab, seed=2)
        g = torch.Generator().manual_seed(i)
        with torch.no_grad():
            for p in m.parameters():
                if p.ndim == 2:
                    p.add_(0.02 * p.std() * torch.randn(p.shape[0], 4, generator=g) @ torch.randn(4, p.shape[1], generator=g))
        save_model(m, tok, root / f"tuned{i}")
        out[f"tuned{i}"] = str(root / f"tuned{i}")
    return out


def _record(models, phase: str, t0: float, tokens: float | None = None) -> None:
    dt = time.time() - t0
    row = {"device": models["device"], "phase": phase, "seconds": round(dt, 3),
           "tokens_per_s": round(tokens / dt, 1) if tokens else None}
    if models["device"] == "cuda":
        row["peak_cuda_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        torch.cuda.reset_peak_memory_stats()
    out = os.environ.get("GPU_CHECK_OUT")
    if out:
        with open(Path(out) / "loops.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")


def _metrics(out) -> list[dict]:
    return [json.loads(l) for l in (Path(out) / "metrics.jsonl").read_text().splitlines()]


def _tokens(out) -> float:
    return sum(r.get("response_len", 0) for r in _metrics(out))


COMMON = dict(tasks=["add:1"], steps=2, max_new_tokens=12, eval_every=0, save_every=0, progress=False, threads=1)


@pytest.fixture
def signal(monkeypatch):
    from shiftkit.tasks import Mixture

    monkeypatch.setattr(Mixture, "reward", lambda self, problem, completion: float(len(completion) % 3))


def test_sampler_and_sft(models, tmp_path):
    from shiftkit import loopkit as kit
    from shiftkit.dist import Dist
    from shiftkit.models import load_model_and_tokenizer
    from shiftkit.sft import SFTConfig, run_sft

    d = Dist()
    model, tok = load_model_and_tokenizer(models["student"], device=d.device)
    t0 = time.time()
    _, roll = kit.rollout(model, tok, ["1+2=", "3+4="], 4, 0, 0, d, max_new_tokens=32, temperature=1.0, rows=4)
    assert roll.completion_ids_BT.device.type == models["device"]
    _record(models, "sample", t0, float(roll.completion_mask_BT.sum()))
    t0 = time.time()
    run_sft(SFTConfig(model=models["student"], out=str(tmp_path / "sft"), tasks=["add:1"], steps=2, batch_size=8,
                      lr=1e-4, warmup=0, save_every=0, progress=False, threads=1, autocast="bfloat16",
                      grad_checkpointing=True, token_budget=64))
    _record(models, "sft 2 steps (bf16, ckpt, micro-batches)", t0)


@pytest.mark.parametrize("kw", [dict(), dict(token_budget=96, grad_checkpointing=True, autocast="bfloat16", kl_coef=0.05,
                                          clip_low=0.2, ppo_epochs=2), dict(lora_r=8, kl_coef=0.05)],
                         ids=["plain", "memory_keys", "lora"])
def test_grpo(models, tmp_path, signal, kw):
    from shiftkit.rl import GRPOConfig, run_grpo

    t0 = time.time()
    run_grpo(GRPOConfig(model=models["student"], out=str(tmp_path / "g"), prompts_per_step=4, group_size=4, lr=1e-4,
                        **COMMON, **kw))
    rows = _metrics(tmp_path / "g")
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in rows)
    _record(models, f"grpo 2 steps {sorted(kw) or 'plain'}", t0, _tokens(tmp_path / "g"))


@pytest.mark.parametrize("kw", [dict(reward_mode="sampled"), dict(reward_mode="student_topk", top_q=0.5, grpo_weight=0.5),
                                dict(reward_mode="full_vocab", clip_low=0.2, ppo_epochs=2, token_budget=96),
                                dict(method="vanilla_opd", kl_mode="fixed", kl_coef=0.1)],
                         ids=["sampled", "topk_topq_grpo", "full_vocab_offpolicy", "vanilla"])
def test_opd(models, tmp_path, signal, kw):
    from shiftkit.opd.loop import OPDConfig, run_opd

    kw = dict(kw)
    method = kw.pop("method", "direct_opd")
    t0 = time.time()
    run_opd(OPDConfig(student=models["student"], teacher=models["teacher"],
                      teacher_ref=models["ref"] if method == "direct_opd" else "", method=method,
                      out=str(tmp_path / "o"), prompts_per_step=2, samples_per_prompt=3, lr=1e-4, guard_patience=0,
                      **COMMON, **kw))
    rows = _metrics(tmp_path / "o")
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in rows)
    _record(models, f"opd 2 steps {method} {kw.get('reward_mode', '')}", t0, _tokens(tmp_path / "o"))


def test_sar_extract_apply_merge(models, tmp_path):
    from shiftkit.sar.pipeline import ApplyConfig, ExtractConfig, MergeConfig, apply, extract, merge

    dev = models["device"]
    t0 = time.time()
    extract(models["ref"], models["tuned1"], tmp_path / "core", ExtractConfig(device=dev))
    apply(models["ref"], tmp_path / "core", tmp_path / "applied", ApplyConfig())
    merge(models["ref"], [models["tuned1"], models["tuned2"]], tmp_path / "merged", MergeConfig(device=dev))
    assert (tmp_path / "merged" / "config.json").exists()
    _record(models, "sar extract + apply + merge", t0)
