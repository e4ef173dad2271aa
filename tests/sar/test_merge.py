"""Merge methods on hand-computed tensors, and agreement with mergekit (0.1.5, in the test extra: never skipped)."""

import pytest
import torch

from shiftkit.errors import ShiftkitError
from shiftkit.sar import merge as mg
from shiftkit.sar.edit import EditOptions, sar_edit_matrix
from shiftkit.sar.linalg import RankSpec, rel_err

BASE = torch.zeros(4)
D1 = torch.tensor([1.0, -2.0, 3.0, 0.5])
D2 = torch.tensor([-3.0, 1.0, 1.0, -0.5])


def test_unknown_method_lists_valid_names():
    with pytest.raises(ShiftkitError, match="dare_ties.*sar.*task_arithmetic.*ties"):
        mg.get_method("slerp")


def test_task_arithmetic_hand():
    got = mg.get_method("task_arithmetic")(BASE, [D1, D2], [1.0, 0.5])
    torch.testing.assert_close(got, torch.tensor([-0.5, -1.5, 3.5, 0.25]))
    got = mg.get_method("task_arithmetic")(BASE, [D1, D2], [1.0, 0.5], lambda_=2.0)
    torch.testing.assert_close(got, torch.tensor([-1.0, -3.0, 7.0, 0.5]))


def test_ties_hand():
    # density 0.5 keeps the top-2 |d| entries: D1 -> [0, -2, 3, 0], D2 -> [-3, 1, 0, 0]
    # elected signs of the sum [-3, -1, 3, 0]: [-, -, +, + (tie)]; agreeing: pos0 D2, pos1 D1, pos2 D1
    got = mg.get_method("ties")(BASE, [D1, D2], [1.0, 1.0], density=0.5)
    torch.testing.assert_close(got, torch.tensor([-3.0, -2.0, 3.0, 0.0]))
    # weights 2 and 1, normalised by the agreeing weight: pos0: -3*1/1, pos1: -4/2, pos2: 6/2
    got = mg.get_method("ties")(BASE, [D1, D2], [2.0, 1.0], density=0.5)
    torch.testing.assert_close(got, torch.tensor([-3.0, -2.0, 3.0, 0.0]))
    # density 1, no normalisation: plain sign-consensus sum: pos3 sum 0 -> '+' wins -> only D1's 0.5
    got = mg.get_method("ties")(BASE, [D1, D2], [1.0, 1.0], density=1.0, normalize=False)
    torch.testing.assert_close(got, torch.tensor([-3.0, -2.0, 4.0, 0.5]))


def test_dare_density_one_is_task_arithmetic_and_mask_statistics():
    ta = mg.get_method("task_arithmetic")(BASE, [D1, D2], [1.0, 1.0])
    torch.testing.assert_close(mg.get_method("dare_linear")(BASE, [D1, D2], [1.0, 1.0], density=1.0), ta)
    d = torch.ones(20000)
    out = mg.get_method("dare_linear")(torch.zeros(20000), [d], [1.0], density=0.3, rescale="none", seed=1)
    assert 0.28 < float((out != 0).float().mean()) < 0.32
    out = mg.get_method("dare_linear")(torch.zeros(20000), [d], [1.0], density=0.3, rescale="l1", seed=1)
    assert float(out.abs().sum()) == pytest.approx(20000.0, rel=1e-5)  # L1 norm preserved
    out = mg.get_method("dare_linear")(torch.zeros(20000), [d], [1.0], density=0.3, rescale="density", seed=1)
    assert float(out.max()) == pytest.approx(1 / 0.3)


def test_degenerate_all_zero_deltas():
    z = torch.zeros(3, 3)
    for name in ("task_arithmetic", "ties", "dare_ties", "dare_linear"):
        out = mg.get_method(name)(z, [z, z], [1.0, 1.0], **mg.params_for(name, {"density": 0.5}))
        assert torch.count_nonzero(out) == 0 and torch.isfinite(out).all()


def test_sar_merge_is_sum_of_projected_deltas_and_target_mode():
    g = torch.Generator().manual_seed(0)
    W0 = torch.randn(30, 12, generator=g)
    d1, d2 = 0.1 * torch.randn(30, 12, generator=g), 0.1 * torch.randn(30, 12, generator=g)
    opts = EditOptions(delta_rank=RankSpec("absolute", 2))
    p = [sar_edit_matrix(W0, W0 + d, opts) for d in (d1, d2)]
    p1, p2 = (e.B_mq @ e.A_qn for e in p)
    got = mg.get_method("sar")(W0, [d1, d2], [0.5, 1.0], edit=opts)
    assert rel_err(got, 0.5 * p1 + p2) < 1e-6
    got = mg.get_method("sar")(W0, [d1, d2], [1.0, 0.7], edit=opts, target=0)
    assert rel_err(got, d1 + 0.7 * p2) < 1e-6
    # vectors (norms, biases) are merged by task arithmetic
    torch.testing.assert_close(mg.get_method("sar")(BASE, [D1, D2], [1.0, 1.0]), D1 + D2)


# ------------------------------------------------------------------------------ mergekit agreement

def _mergekit_merge(name, base, deltas, weights, density, seed):
    """mergekit's own merge_group on one tensor group (base + experts)."""
    from mergekit.merge_methods import registry
    from mergekit.merge_methods.base import TensorGroup

    method = registry.get(name)
    group = TensorGroup.from_tensors([base] + [base + d for d in deltas], base_index=0)
    ids = range(1, len(deltas) + 1)
    params = {"weight": dict(zip(ids, weights)), "density": {i: density for i in ids},
              "int8_mask": False, "normalize": method.default_normalize, "rescale": method.default_rescale,
              "lambda": 1.0}
    torch.manual_seed(seed)
    return method.merge_group(group, **params) - base, method


@pytest.mark.parametrize("name", ["task_arithmetic", "ties", "dare_ties", "dare_linear"])
def test_agrees_with_mergekit(name):
    g = torch.Generator().manual_seed(3)
    base = torch.randn(24, 16, generator=g)
    deltas = [0.01 * torch.randn(24, 16, generator=g) for _ in range(3)]
    weights = [1.0, 0.6, 0.3]
    want, method = _mergekit_merge(name, base, deltas, weights, density=0.4, seed=5)
    # mergekit subtracts and re-adds the base; compare the deltas we would add
    params = mg.params_for(name, dict(density=0.4, seed=5, normalize=method.default_normalize,
                                      rescale="l1" if method.default_rescale else "none"))
    got = mg.get_method(name)(base, [(base + d) - base for d in deltas], weights, **params)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ radix top-k and chunked merges

def _magnitude_mask_argsort(d, density):
    """The previous implementation (mergekit's argsort), frozen here as the reference."""
    if density >= 1:
        return torch.ones_like(d)
    k = max(1, int(density * d.numel()))
    mask = torch.zeros(d.numel(), dtype=d.dtype)
    mask[torch.argsort(d.abs().reshape(-1).float(), descending=True)[:k]] = 1
    return mask.reshape_as(d)


@pytest.mark.parametrize("density", [0.001, 0.1, 0.5, 0.9, 0.999])
def test_radix_magnitude_mask_equals_argsort(density):
    g = torch.Generator().manual_seed(21)
    d = torch.randn(97, 53, generator=g) * torch.logspace(-8, 3, 53)  # many binades, both signs
    torch.testing.assert_close(mg.magnitude_mask(d, density), _magnitude_mask_argsort(d, density), rtol=0, atol=0)


def test_radix_magnitude_mask_ties_and_hand_values():
    d = torch.tensor([0.5, -2.0, 0.5, 0.5, 1.0, 0.0])
    # k = int(0.5 * 6) = 3: |-2| and 1 are in, one of the three tied 0.5s: the first one
    assert mg.magnitude_mask(d, 0.5).tolist() == [1, 1, 0, 0, 1, 0]
    assert mg.magnitude_mask(d, 0.01).tolist() == [0, 1, 0, 0, 0, 0]  # max(1, int(0.06)) = 1
    assert int(mg.magnitude_mask(torch.zeros(10), 0.3).sum()) == 3  # all tied at 0: exactly k
    t, need = mg.topk_threshold(lambda: [d], 3)
    assert t == torch.tensor([0.5]).view(torch.int32).item() and need == 1


@pytest.mark.parametrize("name", ["task_arithmetic", "ties", "dare_ties", "dare_linear"])
@pytest.mark.parametrize("density", [0.3, 1.0])
def test_chunked_merge_equals_whole_tensor(name, density):
    g = torch.Generator().manual_seed(22)
    base = torch.randn(61, 37, generator=g).bfloat16()
    experts = [(base.float() + 0.01 * torch.randn(61, 37, generator=g)).bfloat16() for _ in range(3)]
    weights = [1.0, 0.5, 0.25]
    params = mg.params_for(name, dict(density=density, seed=4, lambda_=1.0))
    whole = mg.merge_tensor(name, base, experts, weights, chunk_elems=10**9, **params)
    W0 = base.float()
    direct = (W0 + mg.get_method(name)(W0, [e.float() - W0 for e in experts], weights, **params)).bfloat16()
    assert torch.equal(whole, direct)
    for chunk in (64, 1000):  # chunk boundaries cut rows; ties/DARE state carried across chunks
        got = mg.merge_tensor(name, base, experts, weights, chunk_elems=chunk, **params)
        if name.startswith("dare") and density < 1:  # the L1 rescale's sums are accumulated per chunk
            torch.testing.assert_close(got.float(), whole.float(), rtol=1e-2, atol=0)  # one bf16 ulp
            assert (got != whole).float().mean() < 0.01
        else:
            assert torch.equal(got, whole)


def test_each_method_registers_its_chunked_form():
    """merge_tensor switches on no method name: a method's chunked form (or ``whole``) is registered with it,
    its parameters reach the chunked form with the method's own defaults, and a method registered without
    one is whole-tensor only (a larger tensor is an error naming it)."""
    from shiftkit.errors import ShiftkitError

    assert {n for n in mg.method_names() if mg._METHODS[n].chunked} == {"task_arithmetic", "ties", "dare_ties",
                                                                        "dare_linear"}
    assert mg._METHODS["sar"].whole and mg._METHODS["sar"].chunked is None
    g = torch.Generator().manual_seed(3)
    base = torch.randn(40, 9, generator=g)
    experts = [base + 0.1 * torch.randn(40, 9, generator=g) for _ in range(2)]
    for kw in (dict(density=0.5), dict(density=0.5, normalize=False)):  # normalize: default True, then passed
        whole = mg.merge_tensor("ties", base, experts, [1.0, 0.5], chunk_elems=10**9, **kw)
        assert torch.equal(mg.merge_tensor("ties", base, experts, [1.0, 0.5], chunk_elems=50, **kw), whole)
    mg.register("_plain")(lambda base_mn, deltas, weights: deltas[0])
    try:
        assert torch.equal(mg.merge_tensor("_plain", base, experts, [1.0, 1.0], chunk_elems=10**9), experts[0])
        with pytest.raises(ShiftkitError, match="'_plain' has no chunked path for a 360-entry tensor"):
            mg.merge_tensor("_plain", base, experts, [1.0, 1.0], chunk_elems=50)
    finally:
        mg._METHODS.pop("_plain")


def test_a_method_schema_is_its_signature_and_unknown_params_are_errors():
    from shiftkit.errors import ShiftkitError
    from shiftkit.sar.pipeline import MergeConfig

    assert list(mg.method_params("task_arithmetic")) == ["lambda_", "normalize"]
    assert list(mg.method_params("dare_ties")) == ["density", "lambda_", "normalize", "rescale", "seed"]
    assert mg.params_for("ties", {"density": 0.5, "seed": 3, "lambda_": 2.0}) == {"density": 0.5, "lambda_": 2.0}
    with pytest.raises(TypeError):  # no **kwargs sink: a parameter a method does not take cannot reach it
        mg.get_method("task_arithmetic")(BASE, [D1], [1.0], density=0.5)
    for method, kw, bad in (("task_arithmetic", {"density": 0.3}, "density"), ("ties", {"rescale": "none"}, "rescale"),
                            ("ties", {"delta_rank": "4"}, "delta_rank"), ("sar", {"density": 0.5}, "density"),
                            ("dare_linear", {"target": 0}, "target")):
        with pytest.raises(ShiftkitError, match=f"merge method '{method}' does not take {bad}"):
            MergeConfig(method=method, **kw).validate()
    MergeConfig(method="sar", delta_rank="4", seed=2, target=0).validate()
    MergeConfig(method="dare_ties", density=0.3, seed=2, rescale="density").validate()
