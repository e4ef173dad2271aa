"""shiftkit.microbatch: micro-batched accumulation == one full-batch step; budget packing;
gradient checkpointing and bf16 autocast on CPU."""

import copy

import pytest
import torch

from shiftkit import losses
from shiftkit import microbatch as MB
from shiftkit.sampling import encode_completions, encode_prompts, forward_completion, forward_logits, token_logprobs

PROMPTS = ["1+1=", "23*4=", "7=", "100-58=", "9*9=", "3+"]
COMPS = ["2", "92 is it", "", "42 yes and more", "81", "4x"]


@pytest.fixture
def batch(tok):
    p_ids, p_mask = encode_prompts(tok, PROMPTS)
    c_ids, c_mask = encode_completions(tok, COMPS)
    g = torch.Generator().manual_seed(3)
    adv_BT = torch.randn(c_ids.shape, generator=g)
    return p_ids, p_mask, c_ids, c_mask, adv_BT


def _logp(model, p_ids, p_mask, c_ids, c_mask):
    return token_logprobs(forward_logits(model, p_ids, p_mask, c_ids, c_mask), c_ids)


def _loss(model, p_ids, p_mask, c_ids, c_mask, adv, old, agg, n_tok, n_seq):
    lp = _logp(model, p_ids, p_mask, c_ids, c_mask)
    return losses.policy_loss(lp, old, adv, c_mask, clip_low=0.2, aggregation=agg, num_tokens=n_tok,
                              num_seqs=n_seq)[0]


def test_budget_packing_and_trimming(batch):
    p_ids, p_mask, c_ids, c_mask, _ = batch
    mbs = MB.micro_batches(p_mask, c_mask, token_budget=24)
    assert sorted(int(r) for mb in mbs for r in mb.rows) == list(range(len(PROMPTS)))  # a partition
    assert len(mbs) >= 3
    for mb in mbs:
        pm, cm = mb.prompt(p_mask), mb.completion(c_mask)
        assert pm[:, 0].any() and cm[:, -1].any()  # no all-padding column left at either end
        assert mb.size == 1 or pm.shape[0] * (pm.shape[1] + cm.shape[1]) <= 24
        assert int(cm.sum()) == int(c_mask[mb.rows].sum())  # trimming dropped only padding
    assert len(MB.micro_batches(p_mask, c_mask, None)) == 1
    assert len(MB.micro_batches(p_mask, c_mask, 1)) == len(PROMPTS)  # every row over budget: one each
    assert sum(mb.size for mb in MB.micro_batches(p_mask, c_mask, 30, sort_by_length=True)) == len(PROMPTS)
    n_tok, n_seq = MB.global_counts(c_mask)
    assert float(n_tok) == float(c_mask.sum()) and float(n_seq) == len(PROMPTS)  # "" + EOS is one token
    # put() reassembles per-micro-batch results (e.g. scorer log-probs) into the full [B, T] layout
    full = torch.full(c_ids.shape, -1.0)
    for mb in mbs:
        mb.put(full, mb.completion(c_ids).float())
    assert torch.equal(torch.where(c_mask.bool(), full, 0.0), torch.where(c_mask.bool(), c_ids.float(), 0.0))


@pytest.mark.parametrize("agg,optim", [("token_mean", "sgd"), ("seq_mean", "sgd"), ("token_mean", "adamw"),
                                       ("seq_mean", "adamw")])
def test_micro_batched_step_equals_full_batch_step(pico, batch, agg, optim):
    """Gradients agree to 1e-6 (measured: ~5e-8, fp32 rounding of differently batched sums). SGD
    (lr 0.5) moves weights by the gradient itself: weights to 1e-6. AdamW's first step is about
    lr * g / |g| per entry, which turns that rounding on near-zero entries into a few percent of lr
    (measured 2.5%), so with AdamW (lr 1e-3) weights agree to 5% of lr = 5e-5."""
    p_ids, p_mask, c_ids, c_mask, adv = batch
    with torch.no_grad():  # an "old" policy off by noise, so ratios differ from 1 and the clip binds somewhere
        old = _logp(pico, p_ids, p_mask, c_ids, c_mask) + 0.3 * torch.randn(c_ids.shape,
                                                                            generator=torch.Generator().manual_seed(5))
    n_tok, n_seq = MB.global_counts(c_mask)
    results = []
    for micro in (False, True):
        model = copy.deepcopy(pico)
        opt = (torch.optim.SGD(model.parameters(), lr=0.5) if optim == "sgd"
               else torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0))
        opt.zero_grad()
        if micro:
            mbs = MB.micro_batches(p_mask, c_mask, token_budget=24)
            assert len(mbs) >= 3
            for mb in MB.accumulating(model, mbs):
                (_loss(model, mb.prompt(p_ids), mb.prompt(p_mask), mb.completion(c_ids), mb.completion(c_mask),
                       mb.completion(adv), mb.completion(old), agg, n_tok, n_seq) * mb.scale).backward()
        else:
            _loss(model, p_ids, p_mask, c_ids, c_mask, adv, old, agg, n_tok, n_seq).backward()
        grads = [p.grad.clone() for p in model.parameters()]
        opt.step()
        results.append((grads, [p.detach().clone() for p in model.parameters()]))
    (g_full, w_full), (g_mb, w_mb) = results
    scale = max(float(g.abs().max()) for g in g_full)
    assert scale > 1e-3
    assert max(float((a - b).abs().max()) for a, b in zip(g_full, g_mb)) <= 1e-6
    moved = max(float((a - b.detach()).abs().max()) for a, b in zip(w_full, pico.parameters()))
    assert moved > 5e-4  # the step did something
    assert max(float((a - b).abs().max()) for a, b in zip(w_full, w_mb)) <= (1e-6 if optim == "sgd" else 5e-5)


def test_gradient_checkpointing_same_grads_fewer_saved_tensors(pico, batch):
    p_ids, p_mask, c_ids, c_mask, adv = batch
    out = []
    for on in (False, True):
        model = copy.deepcopy(pico).train()
        MB.set_gradient_checkpointing(model, on)
        assert MB.is_gradient_checkpointing(model) == on
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda x: saved.append(x.numel()) or x, lambda x: x):
            lp = _logp(model, p_ids, p_mask, c_ids, c_mask)
            loss = losses.policy_loss(lp, lp.detach(), adv, c_mask)[0]
        loss.backward()
        out.append((sum(saved), [p.grad.clone() for p in model.parameters()]))
    (saved_off, g_off), (saved_on, g_on) = out
    assert saved_on < 0.7 * saved_off, (saved_on, saved_off)
    assert max(float((a - b).abs().max()) for a, b in zip(g_off, g_on)) <= 1e-6


def test_bf16_autocast_on_cpu_keeps_fp32_master(pico, batch):
    p_ids, p_mask, c_ids, c_mask, adv = batch
    model = copy.deepcopy(pico).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    # the loops' path: the training forward under autocast (``autocast=bfloat16`` -> ``dtype``), fp32 weights
    raw = forward_completion(model, p_ids, p_mask, c_ids, c_mask, dtype="bfloat16").logits
    lp = token_logprobs(forward_logits(model, p_ids, p_mask, c_ids, c_mask, dtype="bfloat16"), c_ids)
    assert raw.dtype == torch.bfloat16  # the matmuls really ran in bf16
    loss = losses.policy_loss(lp, lp.detach(), adv, c_mask)[0]
    loss.backward()
    opt.step()
    MB.check_fp32_master(model, opt)
    assert all(p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all() for p in model.parameters())
    with torch.no_grad():
        lp32 = _logp(pico, p_ids, p_mask, c_ids, c_mask)
    m = c_mask.bool()
    assert 0 < float((lp.detach() - lp32)[m].abs().max()) < 0.1  # bf16 rounding, not a different model
    assert forward_completion(model, p_ids, p_mask, c_ids, c_mask, dtype="float32").logits.dtype == torch.float32
    with pytest.raises(Exception, match="float32"):
        MB.check_fp32_master(copy.deepcopy(pico).to(torch.bfloat16))
