"""The fused decoder (:class:`shiftkit.sampling.FusedDecoder`) gives today's sampler's tokens and log-probs.

``decode=generic`` is the sampler as it was (the model's own forward per token on a ``DynamicCache``);
``decode=fused`` the preallocated-cache, MKL-packed per-token step for transformers' Llama and Qwen3. Same
seeds, same prompts: token ids equal, log-probs within float rounding (the packed matmul sums in another
order). EOS is made likely so that rows finish at different steps and the batch is compacted.
"""

import logging

import pytest
import torch

from shiftkit.errors import ShiftkitError
from shiftkit.models import TinyModelSpec, make_tiny_model
from shiftkit.sampling import FUSED_ARCHS, forward_completion, sample

PROMPTS = ["1+2=", "345+67=", "8*7=", "1+1=", "12345+678=", "x", "99*99=", "7", "5-3=", "10/2=", "abc", "0"]


def eos_heavy(arch: str, tok, seed: int = 0):
    """A tiny model whose EOS row of the head leans towards the mean last hidden state, so that rows end
    at many different steps (1 to 48)."""
    spec = TinyModelSpec(arch=arch, hidden_size=64, num_hidden_layers=2, intermediate_size=128, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16, tie_word_embeddings=False)
    m = make_tiny_model(spec, vocab_size=len(tok), seed=seed)
    r = sample(m, tok, PROMPTS, max_new_tokens=48, greedy=True, decode="generic")
    with torch.no_grad():
        h = forward_completion(m, r.prompt_ids_BP, r.prompt_mask_BP, r.completion_ids_BT, r.completion_mask_BT,
                               output_hidden_states=True).hidden_states[-1].mean((0, 1))
        m.lm_head.weight[tok.eos_token_id] += 1.2 * h / h.norm()
    return m


def same_rollouts(a, b, atol=1e-5):
    assert a.completion_ids_BT.tolist() == b.completion_ids_BT.tolist()
    assert torch.equal(a.completion_mask_BT, b.completion_mask_BT) and torch.equal(a.eos_B, b.eos_B)
    assert torch.allclose(a.logp_BT, b.logp_BT, atol=atol, rtol=0), (a.logp_BT - b.logp_BT).abs().max()
    assert a.texts == b.texts


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
@pytest.mark.parametrize("how", [dict(greedy=True), dict(row_seeds=list(range(12))),
                                 dict(row_seeds=list(range(100, 112)), temperature=0.7, top_p=0.9)])
def test_fused_decode_gives_the_generic_samplers_tokens(arch, how, tok):
    m = eos_heavy(arch, tok)
    gen = sample(m, tok, PROMPTS, max_new_tokens=48, decode="generic", **how)
    fused = sample(m, tok, PROMPTS, max_new_tokens=48, decode="fused", **how)
    assert gen.info["decoder"] == "generic" and fused.info["decoder"] == "fused"
    lengths = gen.completion_mask_BT.sum(-1)
    assert gen.eos_B.sum() >= 6 and len(set(lengths.tolist())) >= 3  # rows end at different steps
    assert fused.info["compactions"] >= 1  # ... so the fused batch was compacted at least once
    same_rollouts(gen, fused)
    assert sample(m, tok, PROMPTS, max_new_tokens=48, **how).info["decoder"] == "fused"  # auto picks it


def test_fused_decode_unpacked_matmul_is_the_same_too(tok, monkeypatch):
    import shiftkit.sampling as S

    m = eos_heavy("qwen3", tok, seed=1)
    gen = sample(m, tok, PROMPTS, max_new_tokens=32, decode="generic", row_seeds=list(range(12)))
    monkeypatch.setattr(S, "_mkl_packing_available", lambda: False)
    fused = sample(m, tok, PROMPTS, max_new_tokens=32, decode="fused", row_seeds=list(range(12)))
    assert fused.info["matmul"] == "linear"
    same_rollouts(gen, fused)


def test_a_row_alone_or_in_a_batch_gets_the_same_sample(tok):
    m = eos_heavy("llama", tok, seed=2)
    full = sample(m, tok, PROMPTS, max_new_tokens=32, row_seeds=list(range(12)))
    for i in (0, 5, 11):
        one = sample(m, tok, [PROMPTS[i]], max_new_tokens=32, row_seeds=[i])
        n = int(one.completion_mask_BT.sum())
        assert one.completion_ids_BT[0, :n].tolist() == full.completion_ids_BT[i, :n].tolist()
        assert int(full.completion_mask_BT[i].sum()) == n


def test_models_without_a_fused_decoder_say_so(tok, caplog):
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=len(tok), n_positions=128,
                                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))
    with caplog.at_level(logging.WARNING, logger="shiftkit.sampling"):
        r = sample(gpt2, tok, PROMPTS[:3], max_new_tokens=5)
    assert r.info["decoder"] == "generic" and "GPT2LMHeadModel has no fused decode" in r.info["why"]
    assert "GPT2LMHeadModel has no fused decode" in caplog.text
    with pytest.raises(ShiftkitError, match="decode=fused: .*GPT2LMHeadModel"):
        sample(gpt2, tok, PROMPTS[:3], max_new_tokens=5, decode="fused")
    with pytest.raises(ShiftkitError, match="decode='fast'"):
        sample(gpt2, tok, PROMPTS[:3], max_new_tokens=5, decode="fast")
    assert set(FUSED_ARCHS) == {"LlamaForCausalLM", "Qwen3ForCausalLM"}


def test_a_hooked_llama_takes_the_generic_path(tok):
    """A forward hook (an adapter, an offloading or a probing hook) would be skipped by the fused step."""
    m = eos_heavy("llama", tok, seed=3)
    seen = []
    h = m.model.layers[0].mlp.register_forward_hook(lambda mod, i, o: seen.append(o.shape))
    try:
        r = sample(m, tok, PROMPTS[:2], max_new_tokens=4, greedy=True)
    finally:
        h.remove()
    assert r.info["decoder"] == "generic" and "forward hooks" in r.info["why"]
    assert len(seen) == 1 + r.info["steps"]  # the hook ran on the prompt and on every decode step


def test_lora_wrapped_model_takes_the_generic_path(tok):
    from peft import LoraConfig, get_peft_model

    m = get_peft_model(eos_heavy("qwen3", tok, seed=4), LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    r = sample(m, tok, PROMPTS[:2], max_new_tokens=4, greedy=True)
    assert r.info["decoder"] == "generic"
    base = m.get_base_model()  # adapters injected into a Qwen3ForCausalLM: its q_proj is no nn.Linear
    assert "not nn.Linear" in sample(base, tok, PROMPTS[:2], max_new_tokens=4, greedy=True).info["why"]


def test_under_autocast_the_generic_decoder_runs_and_says_why(tok):
    m = eos_heavy("qwen3", tok, seed=5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        r = sample(m, tok, PROMPTS[:2], max_new_tokens=4, greedy=True)
        with pytest.raises(ShiftkitError, match="decode=fused: autocast is on"):
            sample(m, tok, PROMPTS[:2], max_new_tokens=4, greedy=True, decode="fused")
    assert r.info["decoder"] == "generic" and "autocast" in r.info["why"]
    assert sample(m, tok, PROMPTS[:2], max_new_tokens=4, greedy=True).info["decoder"] == "fused"


@pytest.mark.gpu
def test_fused_decode_on_cuda_gives_the_generic_samplers_tokens(tok):
    m = eos_heavy("qwen3", tok).cuda()
    gen = sample(m, tok, PROMPTS, max_new_tokens=32, decode="generic", row_seeds=list(range(12)))
    fused = sample(m, tok, PROMPTS, max_new_tokens=32, decode="fused", row_seeds=list(range(12)))
    same_rollouts(gen, fused, atol=1e-4)
