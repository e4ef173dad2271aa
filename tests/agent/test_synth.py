"""Task synthesis: determinism, the catalogue, and every filter with one problem it must reject and one
it must admit."""

import dataclasses
import json
import os
from pathlib import Path

import pytest

from shiftkit.agent import synth as S
from shiftkit.kernels.fixtures import PROBLEMS

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(REPO / ".cache" / "inductor"))
CFG = S.SynthConfig()


def cand(code, ops=("custom",)):
    return S.Candidate("t", code, list(ops), len(ops), {})


def from_names(names, index=0):
    c = S.compose(0, index, len(names), names)
    assert c is not None and c.ops == names
    return c


GOOD = next(c for c in (from_names(["nn.Linear", "nn.GELU", "nn.LayerNorm"], i) for i in range(50))
            if "\nfeatures = " in c.code)  # a 2-D instance


def test_compose_is_deterministic_and_valid_kernelbench():
    a, b, c = S.compose(3, 7, 4), S.compose(3, 7, 4), S.compose(4, 7, 4)
    assert a.code == b.code and a.code != c.code and a.depth == 4
    mod = S.load_module(a.code)
    assert hasattr(mod, "Model") and mod.get_init_inputs() == [] and mod.SHAPE_VARIANTS == [{"batch_size": 3}]
    assert S.compose(0, 0, 2, ["nn.Conv2d", "nn.NoSuchOp"]) is None


def test_catalogue_is_mined_from_torch():
    m = S.mine_torch_ops()
    assert m["nn_modules"] > 100 and m["functional"] > 50
    assert set(m["covered_mined"]) >= {"nn.Linear", "nn.Conv2d", "nn.Dropout", "F.normalize"}
    assert "nn.Dropout" in m["stochastic_mined"]


def test_filter_stochastic():
    ok, why, _ = S.filter_stochastic(from_names(["nn.Linear", "nn.Dropout"]), CFG)
    assert not ok and "Dropout" in why
    hidden = GOOD.code.replace("return x\n", "return x + 0.01 * torch.empty_like(x).normal_()\n", 1)
    ok, why, _ = S.filter_stochastic(cand(hidden), CFG)
    assert not ok and "normal_" in why
    assert S.filter_stochastic(GOOD, CFG)[0]


def test_filter_eager():
    broken = GOOD.code.replace("nn.Linear(", "nn.Linear(7 + ", 1)  # wrong in_features
    ok, why, _ = S.filter_eager(cand(broken), CFG)
    assert not ok and "eager run failed" in why
    ok, _, st = S.filter_eager(GOOD, CFG)
    assert ok and len(st["out_shape"]) == 2


def test_filter_degenerate():
    const = from_names(["nn.Linear", "torch.sum", "nn.Softmax"])  # softmax over a size-1 dim: all ones
    ok, why, _ = S.filter_degenerate(const, CFG)
    assert not ok and "constant" in why
    insensitive = GOOD.code.replace("return x\n", "return x * 0 + 1.5 * torch.arange(x.shape[-1]).float()\n", 1)
    ok, why, _ = S.filter_degenerate(cand(insensitive), CFG)
    assert not ok and "does not change with the inputs" in why
    assert S.filter_degenerate(GOOD, CFG)[0]


def test_filter_similarity():
    src = (PROBLEMS / "kb_l1_19_ReLU.py").read_text()
    renamed = src.replace("batch_size", "bs").replace("dim", "width").replace("x", "inp")
    ok, why, st = S.filter_similarity(cand(renamed), CFG)
    assert not ok and st["nearest_eval"] == "kb_l1_19_ReLU" and st["max_similarity"] >= 0.9, why
    ok, _, st = S.filter_similarity(GOOD, CFG)
    assert ok and st["max_similarity"] < 0.9
    assert S.ast_similarity(src, src) == 1.0 and S.ast_similarity(src, renamed) > S.ast_similarity(src, GOOD.code)


def test_filter_runtime():
    """The window, not this machine's speed: windows set 1000x either side of GOOD's own measured runtime
    reject it, a wide one accepts it (a loaded machine moves a run by far less than 1000x)."""
    ok, why, st = S.filter_runtime(GOOD, dataclasses.replace(CFG, min_ms=0.0, max_ms=1e9))
    assert ok, why
    ms = st["eager_ms"]
    assert ms > 0
    ok, why, st = S.filter_runtime(GOOD, dataclasses.replace(CFG, min_ms=ms * 1000, max_ms=1e9))
    assert not ok and st["eager_ms"] < ms * 1000 and "outside" in why
    ok, why, st = S.filter_runtime(GOOD, dataclasses.replace(CFG, min_ms=0.0, max_ms=ms / 1000))
    assert not ok and st["eager_ms"] > ms / 1000 and "outside" in why


@pytest.mark.slow
def test_filter_compile(tmp_path, monkeypatch):
    monkeypatch.setenv("SHIFTKIT_SYNTH_CACHE", str(tmp_path))
    branchy = GOOD.code.replace("        return x\n", "        if x.sum() > 0:\n            x = x * 2\n        return x\n", 1)
    assert S.filter_eager(cand(branchy), CFG)[0]  # runs in eager ...
    ok, why, _ = S.filter_compile(cand(branchy), CFG)  # ... but data-dependent control flow breaks the graph
    assert not ok and "torch.compile failed" in why
    small = from_names(["nn.ReLU", "torch.mul"], index=1)
    ok, why, st = S.filter_compile(small, CFG)  # the one real inductor compile in the tests (inductor cache warm)
    assert ok, why
    assert st["compile_cached"] is False and S.filter_compile(small, CFG)[2]["compile_cached"] is True


def test_llm_proposals_are_validated():
    from shiftkit.agent.clients import ScriptedClient, say

    client = ScriptedClient([say('Sure: ["nn.Linear", "nn.ReLU", "nn.LayerNorm"]'), say('["nn.Linear", "nn.Teleport"]'),
                             say("no idea")])
    props = S.llm_proposals(client, 3)
    assert props[0][0] == ["nn.Linear", "nn.ReLU", "nn.LayerNorm"] and props[1][0] is None and props[2][0] is None


def test_run_synth_writes_dataset_and_summary(tmp_path):
    from shiftkit.agent.clients import ScriptedClient, say

    cfg = S.SynthConfig(out=str(tmp_path / "s"), n=10, compile=False, llm_n=2)
    client = ScriptedClient([say('["nn.Linear", "nn.GELU"]'), say("nonsense")])
    s = S.run_synth(cfg, client=client)
    rows = [json.loads(x) for x in (tmp_path / "s" / "dataset.jsonl").read_text().splitlines()]
    rej = [json.loads(x) for x in (tmp_path / "s" / "rejected.jsonl").read_text().splitlines()]
    assert s["candidates"] == 12 and s["admitted"] == len(rows) and len(rows) + len(rej) == 12
    assert sum(s["rejected"].values()) == len(rej) and s["rejected"].get("proposal") == 1
    assert all(r["data_source"] == f"torch#{r['depth']}" and r["code"] and r["ops"] for r in rows)
    assert sorted(p.stem for p in (tmp_path / "s" / "problems").glob("*.py")) == sorted(r["id"] for r in rows)
    assert any(r["provenance"]["generator"].startswith("llm:") for r in rows + rej if "provenance" in r) or \
        any(r.get("ops") == ["nn.Linear", "nn.GELU"] for r in rej)
