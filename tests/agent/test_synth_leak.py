"""A synthesized task must not leak its solution in comments, docstrings, strings or names
(``synth.lint_leak`` / the ``leak`` filter), and the generator's own output is clean."""

import pytest

from shiftkit.agent import synth as S


def _good():
    c = next(c for c in (S.compose(0, i, 3, ["nn.Linear", "nn.GELU", "nn.LayerNorm"]) for i in range(50))
             if c is not None and "\nfeatures = " in c.code)
    assert "self.op0 = nn.Linear" in c.code
    return c


def test_generated_tasks_are_clean():
    n = 0
    for i in range(120):
        c = S.compose(7, i, 1 + i % 5)
        if c is not None:
            n += 1
            assert S.lint_leak(c.code) == [], (c.ops, S.lint_leak(c.code))
            assert S.filter_leak(c, S.SynthConfig())[0]
    assert n > 100


@pytest.mark.parametrize("edit,word", [
    (lambda s: s.replace("    def forward(self, x):\n", "    def forward(self, x):\n        # hint: fuse these into one pass\n", 1), "comment"),
    (lambda s: s.replace('"""Synthesized', '"""Tiled and vectorized best. Synthesized', 1), "string at line 1"),
    (lambda s: s.replace("self.op0", "self.fused_op0"), "name 'fused_op0'"),
    (lambda s: s.replace("def get_inputs", "def fast_path():\n    return 0\n\n\ndef get_inputs", 1), "name 'fast_path'"),
    (lambda s: s.replace("import torch\n", "import torch\nfrom torch.utils.cpp_extension import load_inline\n", 1), "load_inline"),
    (lambda s: s + '\nSRC = "__global__ void k() {}"\n', "__global__"),
    (lambda s: s + "\n\nclass ModelNew(Model):\n    pass\n", "ModelNew"),
])
def test_leaks_are_rejected_by_the_first_filter(edit, word):
    good = _good()
    bad = S.Candidate("t", edit(good.code), good.ops, good.depth, {})
    assert bad.code != good.code
    why = S.lint_leak(bad.code)
    assert any(word in w for w in why), why
    assert list(S.FILTERS)[0] == "leak"
    failed, reason = S.run_filters(bad, S.SynthConfig(), ["leak", "stochastic"])
    assert failed == "leak" and reason.startswith("leaks a solution")
