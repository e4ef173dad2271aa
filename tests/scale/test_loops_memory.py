"""The memory keys in the native loops (shiftkit.microbatch.MemoryConfig): a micro-batched run gives the
one-batch run's weights, the chunked scorer gives sampling.score, row-chunked rollouts give the same
tokens, LoRA trains only adapters and checkpoints/resumes them, checkpointing and bf16 autocast run."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from shiftkit import loopkit as kit
from shiftkit import logprobs
from shiftkit import microbatch as MB
from shiftkit.dist import Dist
from shiftkit.errors import ShiftkitError
from shiftkit.models import prepare_policy
from shiftkit.rl import GRPOConfig, run_grpo
from shiftkit.sampling import score
from shiftkit.sft import SFTConfig, run_sft


def _grpo(model, out, **kw) -> dict:
    base = dict(model=model, out=str(out), tasks=["add:1"], steps=2, prompts_per_step=3, group_size=4,
                max_new_tokens=10, lr=1e-2, eval_every=0, progress=False, threads=1, save_every=0)
    base.update(kw)
    return run_grpo(GRPOConfig(**base))


def _w(out) -> dict:
    return load_file(str(Path(out) / "final" / "model.safetensors"))


def _rows(out) -> list[dict]:
    return [json.loads(l) for l in (Path(out) / "metrics.jsonl").read_text().splitlines()]


def _max_diff(a, b) -> float:
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)


@pytest.mark.parametrize("kw", [dict(), dict(kl_coef=0.1, clip_low=0.2, ppo_epochs=2, aggregation="seq_mean")],
                         ids=["reinforce", "ppo_kl_seqmean"])
def test_grpo_micro_batched_run_equals_one_batch_run(pico_dir, tmp_path, length_reward, kw):
    _grpo(pico_dir, tmp_path / "one", **kw)
    _grpo(pico_dir, tmp_path / "mb", token_budget=40, logit_chunk=7, **kw)
    assert all(r["micro_batches"] == 1 for r in _rows(tmp_path / "one"))
    assert all(r["micro_batches"] >= 3 for r in _rows(tmp_path / "mb"))  # the budget did split the batch
    one, mb = _w(tmp_path / "one"), _w(tmp_path / "mb")
    w0 = load_file(str(Path(pico_dir) / "model.safetensors"))
    assert _max_diff(w0, one) > 1e-4  # it trained
    # relative to the update (Adam can turn rounding in a near-zero gradient into a full step for a few weights)
    num = sum(((one[k] - mb[k]) ** 2).sum() for k in one) ** 0.5
    assert num / sum(((one[k] - w0[k]) ** 2).sum() for k in one) ** 0.5 < 1e-4
    for a, b in zip(_rows(tmp_path / "one"), _rows(tmp_path / "mb")):
        assert a["reward"] == b["reward"]  # same samples: step 1 sampled from equal weights
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-5)
        assert a["entropy"] == pytest.approx(b["entropy"], rel=1e-4)


def test_rollout_gap_metric_is_zero_on_policy_at_temperature_one(pico_dir, tmp_path, length_reward):
    rows = _rows(_grpo(pico_dir, tmp_path / "g", steps=1)["out"].rsplit("/final", 1)[0])
    assert rows[0]["rollout/logprob_gap"] < 1e-4  # the sampler's log-probs are the trainer's
    rows = _rows(_grpo(pico_dir, tmp_path / "t", steps=1, temperature=0.7, top_p=0.8)["out"].rsplit("/final", 1)[0])
    assert rows[0]["rollout/logprob_gap"] > 1e-3  # top-p renormalises: the sampler's are not the trainer's


def test_score_mb_equals_score_and_rollout_rows_do_not_change_tokens(pico, tok):
    d = Dist()
    prompts = ["1+2=", "33+4=", "5="]
    _, a = kit.rollout(pico, tok, prompts, 3, seed=1, step=2, d=d, max_new_tokens=9, temperature=1.0)
    _, b = kit.rollout(pico, tok, prompts, 3, seed=1, step=2, d=d, max_new_tokens=9, temperature=1.0, rows=2)
    assert a.texts == b.texts
    assert torch.equal(a.completion_mask_BT, b.completion_mask_BT)
    assert torch.equal(a.completion_ids_BT * a.completion_mask_BT, b.completion_ids_BT * b.completion_mask_BT)
    assert torch.allclose(a.logp_BT, b.logp_BT, atol=1e-5)
    args = (a.prompt_ids_BP, a.prompt_mask_BP, a.completion_ids_BT, a.completion_mask_BT)
    mbs = MB.micro_batches(a.prompt_mask_BP, a.completion_mask_BT, 30)
    assert len(mbs) > 2
    ref = score(pico, *args, temperature=0.9)
    assert torch.allclose(logprobs.score_mb(pico, *args, mbs, temperature=0.9, chunk=5), ref, atol=1e-5)


def test_lora_grpo_trains_only_adapters_and_exports_a_merged_model(pico_dir, tmp_path, length_reward):
    peft = pytest.importorskip("peft")
    s = _grpo(pico_dir, tmp_path / "lora", lora_r=4, kl_coef=0.05)
    merged, base = _w(tmp_path / "lora"), load_file(str(Path(pico_dir) / "model.safetensors"))
    assert _max_diff(base, merged) > 1e-5  # the merged adapters moved the weights
    assert all(torch.equal(base[k], merged[k]) for k in base if "norm" in k or "embed" in k)  # only linear layers
    assert (tmp_path / "lora" / "adapter" / "adapter_config.json").exists()
    from transformers import AutoModelForCausalLM

    m = peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(pico_dir), tmp_path / "lora" / "adapter")
    m = m.merge_and_unload()
    sd = m.state_dict()
    assert max((sd[k] - merged[k]).abs().max().item() for k in merged) < 1e-5
    assert s["out"].endswith("final")
    assert _rows(tmp_path / "lora")[-1]["kl"] > 0  # the reference is the base with adapters off


def test_lora_checkpoint_round_trip(pico, tok, tmp_path):
    pytest.importorskip("peft")
    from shiftkit.runs import RunDir

    cfg = MB.MemoryConfig(lora_r=2)
    m = prepare_policy(pico, cfg)
    opt = kit.make_optimizer(m, 1e-2, 0.0)
    x = torch.tensor([[3, 4, 5, 6]])
    m(input_ids=x, labels=x).loss.backward()
    opt.step()
    run = RunDir(tmp_path / "r", {"a": 1})
    run.save_checkpoint(1, m, tok, opt)
    from shiftkit.models import TinyModelSpec, make_tiny_model

    fresh = prepare_policy(make_tiny_model(TinyModelSpec(hidden_size=32, num_hidden_layers=2, intermediate_size=64,
                                                             num_attention_heads=4, num_key_value_heads=2, head_dim=8),
                                               vocab_size=len(tok), seed=0), cfg)
    opt2 = kit.make_optimizer(fresh, 1e-2, 0.0)
    step, _ = run.load_trainer_state(run.latest_checkpoint(), fresh, opt2)
    assert step == 1
    a, b = m.state_dict(), fresh.state_dict()
    lora_keys = [k for k in a if "lora_" in k]
    assert lora_keys and all(torch.equal(a[k], b[k]) for k in lora_keys)
    assert any(a[k].abs().sum() > 0 for k in lora_keys if "lora_B" in k)  # the step moved lora_B off 0


def test_checkpointing_and_bf16_autocast_run_with_fp32_master(pico_dir, tmp_path, length_reward):
    _grpo(pico_dir, tmp_path / "ck", grad_checkpointing=True, autocast="bfloat16", token_budget=60)
    w = _w(tmp_path / "ck")
    assert all(v.dtype == torch.float32 for v in w.values())
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in _rows(tmp_path / "ck"))
    run_sft(SFTConfig(init="weak", out=str(tmp_path / "sft"), tasks=["add:1"], steps=2, batch_size=8, lr=1e-3,
                      warmup=0, progress=False, threads=1, grad_checkpointing=True, autocast="bfloat16",
                      token_budget=50))
    assert _rows(tmp_path / "sft")[-1]["micro_batches"] > 1


def test_memory_keys_are_validated():
    with pytest.raises(ShiftkitError, match="autocast"):
        MB.MemoryConfig(autocast="fp8").validate_memory("rl")
    with pytest.raises(ShiftkitError, match="lora_alpha.*lora_r"):
        MB.MemoryConfig(lora_alpha=8).validate_memory("rl")
    with pytest.raises(ShiftkitError, match=">= 0"):
        MB.MemoryConfig(token_budget=-1).validate_memory("rl")
    MB.MemoryConfig(lora_r=4, lora_alpha=8).validate_memory("rl")
