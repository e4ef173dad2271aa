"""The kernel-grammar learning task: the format a tiny policy emits, the problems, the renderer, and the
real environment's verdicts on rendered kernels."""

import random
import types

import pytest

from shiftkit.agent import kernel_grammar as G
from shiftkit.kernels.envclient import KernelEnv, LocalKernelEnv
from shiftkit.kernels.analysis import analyze_solution
from shiftkit.kernels.findings import Finding, errors
from shiftkit.kernels.specs import extract_specs


def test_format_and_parse_round_trip_every_composition():
    comps = G.all_compositions()
    assert len(comps) == 72 and len(set(comps)) == 72
    for c in comps:
        text = G.format_composition(c)
        assert G.parse_composition(text) == c and G.parse_composition(f"\n  {text}\nmore") == c
        short = G.format_composition(c, compact=True)
        assert G.parse_composition(short) == c and len(short) <= 25
        assert all(w.split("=")[0] + "=" in G.VOCAB and w.split("=")[1] in G.VOCAB for w in text.split())


@pytest.mark.parametrize("text,word", [
    ("order=rc block=0 vec=simd omp=off", "expected 5"),
    ("rc 0 simd off", "expected 5"),
    ("cr 0 simd off nope", "variant='nope'"),
    ("0 rc simd off exact", "order='0'"),
    ("block=0 order=rc vec=simd omp=off variant=exact", "expected slot 'order'"),
    ("order=rc block=32 vec=simd omp=off variant=exact", "block='32'"),
    ("", "expected 5"),
])
def test_parse_rejects(text, word):
    with pytest.raises(ValueError, match=word):
        G.parse_composition(text)


def test_problems_are_runnable_kernelbench_and_splits_are_disjoint():
    import torch

    train, held = set(G.SPLITS["train"]), set(G.SPLITS["heldout"])
    assert train and held and not train & held and train | held == set(G.PROBLEMS)
    assert not {G.PROBLEMS[n].func for n in train} & {G.PROBLEMS[n].func for n in held}
    for p in G.PROBLEMS.values():
        mod = types.ModuleType(p.name)
        exec(compile(p.source(), p.name, "exec"), mod.__dict__)
        mod.rows = 5
        y = mod.Model(*mod.get_init_inputs())(*mod.get_inputs())
        assert y.shape == ((5, p.cols) if p.family == "ew" else (5, 1)) and torch.isfinite(y).all()


def test_every_rendering_extracts_statically_and_passes_the_static_checks():
    for p in (G.PROBLEMS["g_ew_clamp_1024x1024"], G.PROBLEMS["g_red_sumsq_1024x1024"]):
        srcs = set()
        for c in G.all_compositions():
            src = G.render_solution(p, c)
            assert src == G.render_solution(p, c)
            srcs.add(src)
            specs, finds = extract_specs(src)
            assert len(specs) == 1 and specs[0].kind == "c" and not finds
            found = errors([Finding.from_dict(d) for d in analyze_solution({"solution.py": src}, "solution.py", "cpu")["findings"]])
            assert not found, (G.format_composition(c), found)
        assert len(srcs) == 72


def test_sft_and_rl_rows():
    rows = G.sft_rows(20, seed=3)
    assert rows == G.sft_rows(20, seed=3) and rows != G.sft_rows(20, seed=4)
    for r in rows:
        assert r["problem_name"] in G.SPLITS["train"] and r["prompt"].endswith("kernel:")
        assert r["problem"] == G.PROBLEMS[r["problem_name"]].source()
        G.parse_composition(r["completion"])
    assert [r["problem_name"] for r in G.rl_rows("heldout")] == G.SPLITS["heldout"]


class FakeEnv(KernelEnv):
    def __init__(self):
        self.seen = []

    def evaluate(self, problem, solution, mode="verify", config=None, problem_name="problem"):
        self.seen.append((problem_name, mode, solution, config))
        return {"reward": 2.0, "reason": "ok", "findings": []}


def test_grammar_reward_parses_renders_and_grades_format_errors():
    env, logged = FakeEnv(), {}
    comp = G.Composition("rc", "16", "simd", "off", "exact")
    out = G.grammar_reward(["p", "p"], [" " + G.format_composition(comp), "order=rc oops"],
                           ["g_ew_relu_1024x1024"] * 2, env=env, log_extra=lambda k, v: logged.__setitem__(k, v))
    assert out == [2.0, -1.0]
    assert env.seen == [("g_ew_relu_1024x1024", "profile", G.render_solution(G.PROBLEMS["g_ew_relu_1024x1024"], comp),
                         G.TASK_EVAL_CONFIG)]
    assert logged["kernel"][1]["reason"].startswith("format_error")


@pytest.mark.slow
def test_rendered_kernels_on_the_real_environment():
    """Every loop structure of both families is correct when exact (+1 in verify mode, shape variant
    included: rows=37 leaves partial tiles), and each shortcut is caught (-1)."""
    env = LocalKernelEnv()
    cases = [(G.Composition("rc", "0", "none", "off", "exact"), 1.0), (G.Composition("cr", "0", "simd", "on", "exact"), 1.0),
             (G.Composition("rc", "16", "simd", "on", "exact"), 1.0), (G.Composition("cr", "64", "none", "off", "exact"), 1.0),
             (G.Composition("rc", "0", "simd", "off", "drop_op"), -1.0), (G.Composition("cr", "16", "none", "off", "half_cols"), -1.0)]
    for name in ("g_ew_leaky_768x1024", "g_red_sumabs_768x1024"):
        p = G.PROBLEMS[name]
        for c, want in cases:
            d = env.evaluate(p.source(), G.render_solution(p, c), "verify", {"trials": 2}, p.name)
            assert d["reward"] == want, (name, G.format_composition(c), d["reason"])


def test_random_composition_is_uniform_over_slots():
    rng = random.Random(0)
    seen = {k: set() for k in G.SLOTS}
    for _ in range(200):
        c = G.random_composition(rng)
        for k in G.SLOTS:
            seen[k].add(getattr(c, k))
    assert all(seen[k] == set(v) for k, v in G.SLOTS.items())
