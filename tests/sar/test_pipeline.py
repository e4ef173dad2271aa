"""Checkpoint-level SAR: extract/apply/sweep/merge on pico Qwen3 models, PEFT export, bad input via the CLI."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from shiftkit.models import TinyModelSpec, load_model, make_char_tokenizer, make_tiny_model, save_model
from shiftkit.sar import linalg as la
from shiftkit.sar import pipeline as pl
from shiftkit.sar.checkpoint import CheckpointReader
from shiftkit.sar.merge import get_method
from shiftkit.sar.reference import official_sar_delta

PICO = TinyModelSpec(hidden_size=64, num_hidden_layers=2, intermediate_size=128, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16)


def _tuned_from(base, seed, rank=3, scale=0.02, noise=1e-4, touch_norm=True):
    g = torch.Generator().manual_seed(seed)
    tuned = make_tiny_model(PICO, seed=0)
    tuned.load_state_dict(base.state_dict())
    with torch.no_grad():
        for name, p in tuned.named_parameters():
            if p.dim() == 2 and any(t in name for t in pl.DEFAULT_TARGETS):
                m, n = p.shape
                p += scale * torch.randn(m, rank, generator=g) @ torch.randn(rank, n, generator=g) / n ** 0.5
                p += noise * torch.randn(m, n, generator=g)
            elif touch_norm and "norm" in name:
                p += 0.01 * torch.randn(p.shape, generator=g)
    return tuned


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("sar_models")
    tok = make_char_tokenizer()
    base = make_tiny_model(PICO, seed=0)
    save_model(base, tok, root / "base")
    save_model(_tuned_from(base, 1), tok, root / "tuned")
    save_model(_tuned_from(base, 2, touch_norm=False), tok, root / "tuned2")
    return root


def _sd(path):
    r = CheckpointReader(path)
    out = {n: r.get(n) for n in r.names}
    r.close()
    return out


def test_extract_edited_checkpoint_matches_official_per_matrix(models, tmp_path):
    cfg = pl.ExtractConfig(delta_rank="3", core_dtype="fp32", edited_out=str(tmp_path / "edited"), device="cpu")
    s = pl.extract(models / "base", models / "tuned", tmp_path / "core", cfg)
    assert s["matrices"] == 14
    base, tuned, edited = _sd(models / "base"), _sd(models / "tuned"), _sd(tmp_path / "edited")
    assert set(edited) == set(base)
    for n, W0 in base.items():
        if pl.is_target(n, tuple(W0.shape), pl.DEFAULT_TARGETS, []):
            ref = official_sar_delta(W0, tuned[n], la.RankSpec("absolute", 3))
            assert la.rel_err(edited[n] - W0, ref) < 1e-4, n
        else:
            assert torch.equal(edited[n], W0), n  # policy base: RL changes to norms dropped
    meta = json.loads((tmp_path / "core" / pl.CORE_META).read_text())
    assert meta["policies"]["norm"]["changed_by_rl"] > 0 and meta["policies"]["norm"]["kept_from"] == "base"
    want_params = sum(3 * (r["m"] + r["n"]) for r in meta["matrices"].values())
    assert meta["params"]["core"] == want_params
    assert meta["params"]["fraction"] == pytest.approx(want_params / sum(t.numel() for t in base.values()))
    assert 0.9 < meta["energy"]["energy_lowrank"] <= 1.0
    assert (tmp_path / "core" / "diagnostics.png").stat().st_size > 1000
    model = load_model(tmp_path / "edited")  # loadable by AutoModelForCausalLM
    assert model.config.hidden_size == 64


def test_apply_reproduces_edited_checkpoint(models, tmp_path):
    for dtype, exact in (("fp32", True), ("fp16", False)):
        cfg = pl.ExtractConfig(delta_rank="0.05", core_dtype=dtype, edited_out=str(tmp_path / f"ed-{dtype}"))
        pl.extract(models / "base", models / "tuned", tmp_path / f"core-{dtype}", cfg)
        pl.apply(models / "base", tmp_path / f"core-{dtype}", tmp_path / f"ap-{dtype}",
                 pl.ApplyConfig(max_shard_mb=0.05))
        ed, ap, base = _sd(tmp_path / f"ed-{dtype}"), _sd(tmp_path / f"ap-{dtype}"), _sd(models / "base")
        assert len(list((tmp_path / f"ap-{dtype}").glob("model-*-of-*.safetensors"))) > 1  # sharded output
        for n in ed:
            if exact:
                assert torch.equal(ed[n], ap[n]), n
            else:
                assert la.rel_err(ap[n] - base[n], ed[n] - base[n]) < 2e-3 if not torch.equal(ed[n], base[n]) else True
        meta = json.loads((tmp_path / f"core-{dtype}" / pl.CORE_META).read_text())
        errs = [r["cast_rel_err"] for r in meta["matrices"].values()]
        assert (max(errs) == 0.0) if exact else (0 < max(errs) < 2e-3)


def test_policy_tuned_keeps_rl_norms_in_core_and_output(models, tmp_path):
    cfg = pl.ExtractConfig(other_tensors="tuned", edited_out=str(tmp_path / "ed"), core_dtype="fp32")
    pl.extract(models / "base", models / "tuned", tmp_path / "core", cfg)
    tuned, ed = _sd(models / "tuned"), _sd(tmp_path / "ed")
    norms = [n for n in tuned if "norm" in n]
    assert norms and all(torch.equal(ed[n], tuned[n]) for n in norms)
    pl.apply(models / "base", tmp_path / "core", tmp_path / "ap")
    ap = _sd(tmp_path / "ap")
    assert all(torch.equal(ap[n], ed[n]) for n in ed)
    with pytest.raises(pl.ShiftkitError, match="dense"):
        pl.export_peft(tmp_path / "core", tmp_path / "peft")


def test_apply_refuses_core_from_another_base(models, tmp_path):
    pl.extract(models / "base", models / "tuned", tmp_path / "core", pl.ExtractConfig())
    with pytest.raises(pl.ShiftkitError, match="hash mismatch"):
        pl.apply(models / "tuned2", tmp_path / "core", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_peft_adapter_reproduces_edited_logits(models, tmp_path):
    peft = pytest.importorskip("peft")
    cfg = pl.ExtractConfig(delta_rank="3", mask="off_diagonal", core_dtype="fp32", scale=1.5,
                           edited_out=str(tmp_path / "ed"), peft_out=str(tmp_path / "adapter"))
    pl.extract(models / "base", models / "tuned", tmp_path / "core", cfg)
    ids = torch.tensor([[5, 17, 33, 60, 8, 71, 2, 40]])
    edited = load_model(tmp_path / "ed").eval()
    lora = peft.PeftModel.from_pretrained(load_model(models / "base"), str(tmp_path / "adapter")).eval()
    base = load_model(models / "base").eval()
    with torch.no_grad():
        le, ll, lb = edited(ids).logits, lora(ids).logits, base(ids).logits
    assert (le - lb).abs().max() > 1e-3  # the edit changes the logits ...
    torch.testing.assert_close(ll, le, rtol=0, atol=1e-4)  # ... and the adapter reproduces them


def test_sweep_cores_equal_single_extracts(models, tmp_path):
    pl.sweep(models / "base", models / "tuned", tmp_path / "sw",
             pl.SweepConfig(delta_ranks=["1", "0.05"], core_dtype="fp32"))
    table = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert [r["core"] for r in table["ranks"]] == ["rank-1", "rank-0.05"]
    assert table["ranks"][0]["param_fraction"] < table["ranks"][1]["param_fraction"]
    pl.extract(models / "base", models / "tuned", tmp_path / "one", pl.ExtractConfig(delta_rank="0.05", core_dtype="fp32"))
    with safe_open(str(tmp_path / "sw" / "rank-0.05" / pl.CORE_WEIGHTS), "pt") as a, \
            safe_open(str(tmp_path / "one" / pl.CORE_WEIGHTS), "pt") as b:
        assert sorted(a.keys()) == sorted(b.keys())
        for k in a.keys():
            torch.testing.assert_close(a.get_tensor(k), b.get_tensor(k), rtol=0, atol=0)


@pytest.mark.parametrize("method", ["ties", "sar"])
def test_merge_checkpoint_equals_tensor_function(models, tmp_path, method):
    own = {"density": 0.5} if method == "ties" else {"delta_rank": "3", "target": -1}  # what each method takes
    cfg = pl.MergeConfig(method=method, weights=[1.0, 0.5], **own)
    pl.merge(models / "base", [models / "tuned", models / "tuned2"], tmp_path / "m", cfg)
    base, t1, t2, merged = (_sd(p) for p in (models / "base", models / "tuned", models / "tuned2", tmp_path / "m"))
    n = "model.layers.1.mlp.down_proj.weight"
    kw = {"density": 0.5} if method == "ties" else {"edit": cfg.edit_options("3")}
    want = base[n] + get_method(method)(base[n], [t1[n] - base[n], t2[n] - base[n]], [1.0, 0.5], **kw)
    torch.testing.assert_close(merged[n], want, rtol=0, atol=1e-6)
    norm = "model.norm.weight"
    assert torch.equal(merged[norm], base[norm]) if method == "sar" else not torch.equal(merged[norm], base[norm])
    load_model(tmp_path / "m")


# ------------------------------------------------------------------------------ bad input through the CLI

def _cli(*args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "shiftkit", "sar", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=120)


def _assert_clean_error(res, out: Path, pattern: str):
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert pattern in lines[0], lines[0]
    assert not out.exists()
    if out.parent.is_dir():
        assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]  # no temp left


@pytest.fixture(scope="module")
def bad_models(models, tmp_path_factory):
    root = tmp_path_factory.mktemp("sar_bad")
    tok = make_char_tokenizer()
    save_model(make_tiny_model(PICO, seed=7), tok, root / "other_base")
    save_model(make_tiny_model(PICO, vocab_size=120, seed=0), tok, root / "big_vocab")
    pl.apply(models / "base", _core(models, root), root / "sharded", pl.ApplyConfig(max_shard_mb=0.05))
    shard = sorted((root / "sharded").glob("model-*.safetensors"))[1]
    shard.unlink()
    return root


def _core(models, root):
    pl.extract(models / "base", models / "tuned", root / "core", pl.ExtractConfig())
    return root / "core"


def test_cli_extract_ok_json(models, tmp_path):
    res = _cli("extract", "--base", models / "base", "--tuned", models / "tuned", "--out", tmp_path / "c",
               "delta_rank=0.05", "core_dtype=bf16", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["matrices"] == 14


@pytest.mark.parametrize("case", ["missing_shard", "vocab", "other_base", "not_writable", "unknown_key",
                                  "bad_rank", "unknown_method", "param_not_taken", "not_a_core"])
def test_cli_bad_input(models, bad_models, tmp_path, case):
    out = tmp_path / "out"
    b, t = models / "base", models / "tuned"
    if case == "missing_shard":
        res, pat = _cli("extract", "--base", b, "--tuned", bad_models / "sharded", "--out", out), "is missing"
    elif case == "vocab":
        res, pat = _cli("extract", "--base", b, "--tuned", bad_models / "big_vocab", "--out", out), "vocab"
    elif case == "other_base":
        res, pat = _cli("extract", "--base", b, "--tuned", bad_models / "other_base", "--out", out), \
            "does not look fine-tuned from this base"
    elif case == "not_writable":
        (tmp_path / "afile").write_text("x")
        out = tmp_path / "afile" / "out"
        res, pat = _cli("extract", "--base", b, "--tuned", t, "--out", out), "is a file"
    elif case == "unknown_key":
        res, pat = _cli("extract", "--base", b, "--tuned", t, "--out", out, "delta_rnk=0.1"), "did you mean 'delta_rank'"
    elif case == "bad_rank":
        res, pat = _cli("extract", "--base", b, "--tuned", t, "--out", out, "delta_rank=1.5"), "bad rank spec"
    elif case == "unknown_method":
        res, pat = _cli("merge", "--base", b, "--experts", t, "--method", "slerp", "--out", out), "valid methods"
    elif case == "param_not_taken":  # used to be dropped silently
        res, pat = (_cli("merge", "--base", b, "--experts", t, "--method", "task_arithmetic", "--out", out, "density=0.3"),
                    "merge method 'task_arithmetic' does not take density")
    else:
        res, pat = _cli("apply", "--base", b, "--core", t, "--out", out), "not a SAR core"
    _assert_clean_error(res, out, pat)


def test_one_yaml_file_is_the_whole_merge(models, tmp_path):
    """Every input is a config field: a merge is one reproducible file (mergekit style), same result as flags."""
    (tmp_path / "merge.yaml").write_text(
        f"base: {models / 'base'}\nexperts: [{models / 'tuned'}, {models / 'tuned2'}]\nout: {tmp_path / 'y'}\n"
        "method: ties\ndensity: 0.5\n")
    res = _cli("merge", "-c", tmp_path / "merge.yaml")
    assert res.returncode == 0, res.stderr
    res = _cli("merge", "--base", models / "base", "--experts", models / "tuned", models / "tuned2", "--method", "ties",
               "--out", tmp_path / "f", "density=0.5")
    assert res.returncode == 0, res.stderr
    a, b = _sd(tmp_path / "y"), _sd(tmp_path / "f")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    missing = _cli("merge", "--base", models / "base", "--out", tmp_path / "m")
    _assert_clean_error(missing, tmp_path / "m", "sar merge needs experts=...")
