"""shiftkit.logprobs: chunked == unchunked (values and gradients, fp32), hand values, degenerate
shapes, and proof that no [B*T, V] tensor is created or kept for the backward."""

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from shiftkit import logprobs as LP
from shiftkit import losses

from shiftkit import advantages as A
from shiftkit.sampling import encode_completions, encode_prompts, forward_logits, score, token_logprobs

B, T, H, V, CH = 3, 5, 16, 50, 4  # N = 15 positions in chunks of 4: chunks cross row boundaries
TEMP = 0.7


def _head(seed, temperature=1.0, bias=False, grad=True, b=B, t=T):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(b, t, H, generator=g, dtype=torch.float64).float().requires_grad_(grad)
    w = (torch.randn(V, H, generator=g) * 0.5).requires_grad_(grad)
    b = (torch.randn(V, generator=g) * 0.1).requires_grad_(grad) if bias else None
    return LP.Head(h, w, b, temperature)


def _logits(head):  # the unchunked path: forward_logits (fp32) / temperature
    return LP.logits_of(head).reshape(B, T, -1)


def _grads(out, head, seed=1):
    """Gradients of <out, random cotangent> w.r.t. hidden, weight (and bias)."""
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed))
    params = [t for t in (head.hidden_BTH, head.weight_VH, head.bias_V) if t is not None]
    return torch.autograd.grad((out * g).sum(), params)


def _close(a, b, tol=1e-6):
    """|a - b| <= tol, relative to the largest |b| when that exceeds 1 (a weight gradient sums N
    fp32 products; chunked and one-shot sums round differently at the 1e-7 relative level)."""
    assert a.shape == b.shape
    scale = max(1.0, float(b.detach().abs().max())) if b.numel() else 1.0
    assert torch.allclose(a.float(), b.float(), atol=tol * scale, rtol=0), float((a - b).abs().max())


@pytest.mark.parametrize("bias", [False, True])
def test_gather_and_token_logprobs_match_unchunked_with_grads(bias):
    head = _head(0, TEMP, bias)
    ids_BTK = torch.randint(0, V, (B, T, 3))
    ref = LP.logprobs_from_logits(_logits(head), ids_BTK)
    out = LP.gather_logprobs(head, ids_BTK, chunk=CH)
    _close(out, ref)
    for a, b in zip(_grads(out, head), _grads(ref, head)):
        _close(a, b)
    # token_logprobs against the loop's own function on raw logits with the temperature
    ids_BT = torch.randint(0, V, (B, T))
    raw = LP.logits_of(LP.Head(head.hidden_BTH, head.weight_VH, head.bias_V, 1.0)).reshape(B, T, V)
    ref_t = token_logprobs(raw, ids_BT, TEMP)
    out_t = LP.token_logprobs(head, ids_BT, chunk=CH)
    _close(out_t, ref_t)
    for a, b in zip(_grads(out_t, head), _grads(ref_t, head)):
        _close(a, b)


def test_topk_entropy_jsd_overlap_match_unchunked():
    s, t = _head(0, TEMP), _head(1)
    ids_ref, lp_ref = LP.topk_from_logits(_logits(s), 4)
    ids, lp = LP.student_topk(s, 4, chunk=CH)
    assert torch.equal(ids, ids_ref)
    _close(lp, lp_ref)
    for a, b in zip(_grads(lp, s), _grads(lp_ref, s)):
        _close(a, b)
    ent, ent_ref = LP.entropy(s, chunk=CH), losses.entropy_from_logits(_logits(s))
    _close(ent, ent_ref)
    for a, b in zip(_grads(ent, s), _grads(ent_ref, s)):
        _close(a, b)
    _close(LP.jsd(s, t, chunk=CH), losses.jsd_from_logits(_logits(s), _logits(t)))
    _close(LP.topk_overlap(s, t, 4, chunk=CH), losses.topk_overlap(_logits(s), _logits(t), 4))
    mass_ref = _logits(s).softmax(-1).topk(4, -1).values.sum(-1)
    _close(LP.topk_mass(s, 4, chunk=CH), mass_ref)


def test_hand_computed_values():
    # one position, V = 2: logits [0, ln 3] -> p = [1/4, 3/4]
    h = torch.tensor([[[0.0, math.log(3.0)]]])
    head = LP.Head(h, torch.eye(2))
    assert abs(float(LP.token_logprobs(head, torch.tensor([[1]]))) - math.log(0.75)) < 1e-6
    assert abs(float(LP.entropy(head)) - -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))) < 1e-6
    # temperature 0.5 doubles the logits: p = [1/10, 9/10]
    assert abs(float(LP.token_logprobs(LP.Head(h, torch.eye(2), None, 0.5), torch.tensor([[1]]))) - math.log(0.9)) < 1e-6
    # full vocab: student p = [1/4, 3/4], Delta = [+1, -1] -> reward sum_v p Delta = -1/2; at ratio 1 the
    # loss is -sum_v sg[p Delta] (one valid token, token mean)
    t = LP.Head(torch.tensor([[[1.0, 0.0]]]), torch.eye(2))
    r = LP.Head(torch.tensor([[[0.0, 1.0]]]), torch.eye(2))  # log pt - log pr = [+1, -1]
    loss, st = losses.direct_opd_full_vocab_loss(head, t, r, torch.ones(1, 1))
    assert abs(float(st["reward"]) - (-0.5)) < 1e-6 and abs(float(loss) - 0.5) < 1e-6
    assert float(st["delta_sum"]) == pytest.approx(0.0, abs=1e-6) and float(st["delta_pos"]) == 1.0


def _full_vocab_ref(s, t, r, mask, old=None, keep=None, **kw):
    """The loop's unchunked full_vocab path: losses.direct_opd_full_vocab + candidate_policy_loss."""
    sl, tl, rl = _logits(s), _logits(t).detach(), _logits(r).detach()
    base = _logits(old).detach() if old is not None else sl.detach()
    adv, _, delta = A.direct_opd_full_vocab(base, tl, rl, scale=kw.get("scale", 1.0), clip=kw.get("clip", 0.0))
    if keep is not None:
        adv = adv * keep.unsqueeze(-1)
    lp = sl.log_softmax(-1)
    loss, _ = losses.candidate_policy_loss(lp, base.log_softmax(-1), adv, mask, clip_low=kw.get("clip_low"),
                                           clip_high=kw.get("clip_high"), aggregation=kw["aggregation"],
                                           num_tokens=kw.get("num_tokens"), num_seqs=kw.get("num_seqs"))
    return loss, adv, delta


@pytest.mark.parametrize("case", [
    dict(aggregation="token_mean"),
    dict(aggregation="seq_mean"),
    dict(aggregation="token_mean", num_tokens=40.0, scale=2.0, clip=0.5, keep=True),
    dict(aggregation="seq_mean", num_seqs=7, old=True, clip_low=0.2, clip_high=0.3),
])
def test_full_vocab_loss_matches_unchunked_with_grads(case):
    case = dict(case)
    s, t, r = _head(0, TEMP), _head(1, grad=False), _head(2, grad=False)
    old = _head(3, TEMP, grad=False) if case.pop("old", False) else None
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]])
    keep = torch.tensor([[1, 0, 1, 1, 0], [0, 1, 1, 0, 1], [1, 1, 1, 1, 1]]) if case.pop("keep", False) else None
    loss_ref, adv_ref, delta_ref = _full_vocab_ref(s, t, r, mask, old, keep, **case)
    loss, st = losses.direct_opd_full_vocab_loss(s, t, r, mask, old=old, keep_BT=keep, chunk=CH, **case)
    _close(loss, loss_ref)
    gs = torch.autograd.grad(loss, [s.hidden_BTH, s.weight_VH])
    gr = torch.autograd.grad(loss_ref, [s.hidden_BTH, s.weight_VH])
    assert gr[0].abs().max() > 1e-3  # the comparison is not vacuous
    for a, b in zip(gs, gr):
        _close(a, b)
    m = mask.bool().unsqueeze(-1)
    _close(st["reward"], (adv_ref * m).sum(-1))
    _close(st["delta_sum"], (delta_ref * m).sum(-1), 1e-5)
    assert torch.equal(st["delta_pos"], ((delta_ref > 0) & m).float().sum(-1))


def test_degenerate_empty_and_fully_masked():
    e = LP.Head(torch.zeros(2, 0, H, requires_grad=True), torch.randn(V, H, requires_grad=True))
    assert LP.gather_logprobs(e, torch.zeros(2, 0, 3, dtype=torch.long)).shape == (2, 0, 3)
    ids, lp = LP.student_topk(e, 4)
    assert ids.shape == lp.shape == (2, 0, 4)
    assert LP.entropy(e).shape == (2, 0)
    loss, st = losses.direct_opd_full_vocab_loss(e, e.detach(), e.detach(), torch.zeros(2, 0))
    loss.backward()
    assert float(loss.detach()) == 0.0 and st["reward"].shape == (2, 0) and float(e.weight_VH.grad.abs().sum()) == 0.0
    # fully masked: loss 0, gradients exactly 0 and finite
    s, t, r = _head(0), _head(1, grad=False), _head(2, grad=False)
    for agg in losses.AGGREGATIONS:
        loss, st = losses.direct_opd_full_vocab_loss(s, t, r, torch.zeros(B, T), aggregation=agg, chunk=CH)
        g = torch.autograd.grad(loss, [s.hidden_BTH, s.weight_VH])
        assert float(loss.detach()) == 0.0 and all(float(x.abs().sum()) == 0.0 for x in g)
        assert float(st["reward"].detach().abs().sum()) == 0.0


class _LargestTensor(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for o in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(o, torch.Tensor):
                self.largest = max(self.largest, o.numel())
        return out


def test_no_full_logits_in_forward_or_backward():
    """Largest tensor any op creates (forward and backward) is one chunk's [C, V], never [N, V]; and
    the forward keeps nothing of size V for the backward (it is recomputed chunk by chunk there)."""
    b, t = 4, 8
    s, te, r = _head(0, TEMP, b=b, t=t), _head(1, grad=False, b=b, t=t), _head(2, grad=False, b=b, t=t)
    mask = torch.ones(b, t)
    assert V * H < b * t * V  # so a [N, V] tensor would be the largest one
    saved = []

    def pack(x):
        if x.dim() >= 1 and x.shape[-1] == V:
            saved.append(x.numel())
        return x

    for run in (lambda: LP.gather_logprobs(s, torch.randint(0, V, (b, t, 2)), chunk=CH).sum(),
                lambda: losses.direct_opd_full_vocab_loss(s, te, r, mask, chunk=CH)[0]):
        saved.clear()
        with _LargestTensor() as mode:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):  # what the forward keeps
                out = run()
            out.backward()
        assert mode.largest <= max(CH * V, V * H), mode.largest
        assert sum(saved) < CH * V, saved
    with _LargestTensor() as mode:  # the check does see a full-logits computation
        LP.logprobs_from_logits(LP.logits_of(s), torch.zeros(b * t, 1, dtype=torch.long)).sum().backward()
    assert mode.largest >= b * t * V


def test_model_forward_matches_forward_logits_and_score(pico, tok):
    prompts, comps = ["12+3=", "7*8="], ["15", "56 and more"]
    p_ids, p_mask = encode_prompts(tok, prompts)
    c_ids, c_mask = encode_completions(tok, comps)
    args = (p_ids, p_mask, c_ids, c_mask)
    head = LP.model_head(pico, *args, temperature=TEMP)
    logits = forward_logits(pico, *args) / TEMP
    ref = LP.logprobs_from_logits(logits, c_ids.unsqueeze(-1)).squeeze(-1)
    out = LP.token_logprobs(head, c_ids, chunk=3)
    _close(out, ref)
    # gradient w.r.t. every model parameter: chunked head == full logits
    g_ref = torch.autograd.grad((ref * c_mask).sum(), list(pico.parameters()))
    g_out = torch.autograd.grad((out * c_mask).sum(), list(pico.parameters()))
    for a, b in zip(g_out, g_ref):
        _close(a, b)
    _close(LP.score(pico, *args, temperature=TEMP, chunk=3), score(pico, *args, temperature=TEMP))


def test_bf16_autocast_chunked_matches_autocast_logits(pico, tok):
    """Under bf16 autocast the chunked head runs the same bf16 matmul (values identical); its
    backward runs the head's linear in fp32, so gradients agree to bf16 rounding (< 2% of the max)."""
    p_ids, p_mask = encode_prompts(tok, ["1+1=", "22*3="])
    c_ids, c_mask = encode_completions(tok, ["2", "66 ok"])
    args = (p_ids, p_mask, c_ids, c_mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # as accelerate's mixed precision wraps a trainer's loss
        out = LP.token_logprobs(LP.model_head(pico, *args, temperature=TEMP), c_ids, chunk=3)
        ref = token_logprobs(forward_logits(pico, *args), c_ids, TEMP)
    assert torch.equal(out, ref)
    g_out = torch.autograd.grad((out * c_mask).sum(), list(pico.parameters()))
    g_ref = torch.autograd.grad((ref * c_mask).sum(), list(pico.parameters()))
    scale = max(float(g.abs().max()) for g in g_ref)
    assert all(g.dtype == torch.float32 for g in g_out)
    assert max(float((a - b).abs().max()) for a, b in zip(g_out, g_ref)) < 0.02 * scale
