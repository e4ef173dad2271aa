"""The padding-free update (``packing=true``): a micro-batch's rows packed end to end into one sequence
(position ids restart per row) give the padded forward's log-probs and the padded update's gradient, on a
tiny Qwen3 and a tiny Llama (untied head); the packed token budget counts real tokens; a model that mixes
packed rows is refused.

Tolerance: the packed forward is the same function of the same weights, but its matmuls see ``[N, H]``
instead of ``[B, L, H]`` and its attention a block-causal mask over the pack instead of a padding mask,
so sums are taken in another order: fp32 rounding, measured <= 1e-6 on log-probs and ~1.5e-7 relative on
gradients here (both models, one and several micro-batches). The bounds (1e-5 on log-probs, 1e-5 relative
on gradients) are 10-100x above that and far below any real difference (positions that do not restart, or
a row attending across the pack, fail them: the mutants of packed_layout and of the mask).
"""

import copy

import pytest
import torch

from shiftkit import logprobs, losses
from shiftkit import microbatch as MB
from shiftkit.errors import ShiftkitError
from shiftkit.models import TinyModelSpec, make_tiny_model
from shiftkit.sampling import encode_completions, encode_prompts

PROMPTS = ["1+1=", "23*4=", "7=", "100-58=", "9*9=", "3+"]
COMPS = ["2", "92 is it", "", "42 yes and more", "81", "4x"]
LLAMA = TinyModelSpec(arch="llama", hidden_size=32, num_hidden_layers=2, intermediate_size=64, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=8, tie_word_embeddings=False)


@pytest.fixture(params=["qwen3", "llama"])
def model(request, pico, tok):
    return pico if request.param == "qwen3" else make_tiny_model(LLAMA, vocab_size=len(tok), seed=1)


@pytest.fixture
def batch(tok):
    p_ids, p_mask = encode_prompts(tok, PROMPTS)
    c_ids, c_mask = encode_completions(tok, COMPS)
    adv_BT = torch.randn(c_ids.shape, generator=torch.Generator().manual_seed(3))
    return p_ids, p_mask, c_ids, c_mask, adv_BT


def _grads_and_logp(model, batch, packed: bool, token_budget: int = 0):
    p_ids, p_mask, c_ids, c_mask, adv = batch
    m = copy.deepcopy(model).train()
    n_tok = c_mask.sum()
    mbs = MB.micro_batches(p_mask, c_mask, token_budget, packed=packed)
    logp_BT = torch.zeros(c_ids.shape)
    for mb in MB.accumulating(m, mbs):
        ids, mask = mb.completion(c_ids), mb.completion(c_mask)
        head = logprobs.model_head(m, mb.prompt(p_ids), mb.prompt(p_mask), ids, mask, packed=mb.packed)
        lp = logprobs.token_logprobs(head, ids, chunk=5)
        old = lp.detach() - 0.2 * mb.completion(adv)  # ratios off 1, so the clip binds somewhere
        loss, _ = losses.policy_loss(lp, old, mb.completion(adv), mask, clip_low=0.2, num_tokens=n_tok)
        loss.backward()
        mb.put(logp_BT, lp.detach())
    return [p.grad.clone() for p in m.parameters()], logp_BT * c_mask, len(mbs)


@pytest.mark.parametrize("budget", [0, 30])
def test_packed_update_equals_padded_update(model, batch, budget):
    g_pad, lp_pad, _ = _grads_and_logp(model, batch, packed=False, token_budget=budget)
    g_pack, lp_pack, n = _grads_and_logp(model, batch, packed=True, token_budget=budget)
    assert n >= (2 if budget else 1)
    c_mask = batch[3].bool()
    assert float((lp_pad - lp_pack)[c_mask].abs().max()) < 1e-5
    scale = max(float(g.abs().max()) for g in g_pad)
    assert scale > 1e-3
    assert max(float((a - b).abs().max()) for a, b in zip(g_pad, g_pack)) < 1e-5 * scale


def test_packed_budget_counts_real_tokens_and_packs_more_rows(batch):
    p_ids, p_mask, c_ids, c_mask, _ = batch
    n_B = p_mask.sum(-1) + c_mask.sum(-1)
    for budget in (20, 30, 45):
        mbs = MB.micro_batches(p_mask, c_mask, budget, packed=True)
        assert sorted(int(r) for mb in mbs for r in mb.rows) == list(range(len(PROMPTS)))
        assert all(mb.packed for mb in mbs)
        assert all(mb.size == 1 or int(n_B[mb.rows].sum()) <= budget for mb in mbs)
        assert len(mbs) <= len(MB.micro_batches(p_mask, c_mask, budget))  # no padding counted: never more


def test_packed_layout_positions_and_sources_by_hand():
    p_mask = torch.tensor([[0, 1, 1], [1, 1, 1]])
    c_mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    keep, pos, src = logprobs.packed_layout(p_mask, c_mask)
    assert pos.tolist() == [0, 1, 2, 3, 0, 1, 2, 3]  # row 0: 2 prompt + 2 completion tokens; row 1: 3 + 1
    assert src.tolist() == [[1, 2, -1], [6, -1, -1]]  # the token before each completion token
    with pytest.raises(ShiftkitError, match="without holes"):
        logprobs.packed_layout(p_mask, torch.tensor([[1, 0, 1], [1, 0, 0]]))


def test_a_model_that_mixes_packed_rows_is_refused(pico, batch):
    class IgnoresPositions(torch.nn.Module):  # drops the position ids: the pack reads as one sequence
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, position_ids=None, **kw):
            return self.m(**kw)

        def get_output_embeddings(self):
            return self.m.get_output_embeddings()

    p_ids, p_mask, c_ids, c_mask, _ = batch
    with pytest.raises(ShiftkitError, match="mixes packed rows.*packing=false"):
        logprobs.model_head(IgnoresPositions(copy.deepcopy(pico)), p_ids, p_mask, c_ids, c_mask, packed=True)


def test_the_packed_head_computes_logits_only_at_completion_positions(pico, batch):
    p_ids, p_mask, c_ids, c_mask, _ = batch
    head = logprobs.model_head(pico, p_ids, p_mask, c_ids, c_mask, packed=True)
    assert torch.equal(head.valid_BT, c_mask.bool())
    rows = []
    out = logprobs.map_chunks(lambda lg, ex: rows.append(lg[0].shape[0]) or (lg[0].sum(-1),), [head], [], chunk=7)[0]
    assert sum(rows) == int(c_mask.sum()) < c_mask.numel()  # no logit at a padding position
    assert torch.equal(out[~c_mask.bool()], torch.zeros(int((~c_mask.bool()).sum())))
