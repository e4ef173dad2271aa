import pytest
import torch

from shiftkit.errors import ShiftkitError
from shiftkit.models import (TinyModelSpec, check_vocab, load_model_and_tokenizer, make_char_tokenizer,
                             make_tiny_model, num_params, save_model)
from shiftkit.sampling import encode_completions, encode_prompts, sample, score, score_texts


def test_char_tokenizer_roundtrip(tok, tmp_path):
    ids = tok("12+34=\n", add_special_tokens=False)["input_ids"]
    assert len(ids) == 7 and tok.decode(ids) == "12+34=\n"
    assert (tok.pad_token_id, tok.eos_token_id) == (0, 2)
    tok.save_pretrained(tmp_path)
    assert (tmp_path / "tokenizer.json").exists()


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
def test_save_load_roundtrip_same_logits(arch, tok, tmp_path):
    m = make_tiny_model(TinyModelSpec(arch=arch, hidden_size=32, num_hidden_layers=1, intermediate_size=64,
                                      num_attention_heads=2, num_key_value_heads=1, head_dim=16), len(tok))
    save_model(m, tok, tmp_path / "m")
    assert (tmp_path / "m" / "model.safetensors").exists()
    m2, tok2 = load_model_and_tokenizer(tmp_path / "m")
    x = torch.tensor([[5, 6, 7, 8]])
    assert torch.equal(m(x).logits, m2(x).logits)
    assert type(m2).__name__ == {"qwen3": "Qwen3ForCausalLM", "llama": "LlamaForCausalLM"}[arch]
    assert num_params(m2) == num_params(m)


def test_bad_model_sources(tmp_path, tok, pico_dir):
    with pytest.raises(ShiftkitError, match="not found"):
        load_model_and_tokenizer(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ShiftkitError, match="no config.json"):
        load_model_and_tokenizer(tmp_path / "empty")
    small = make_tiny_model(TinyModelSpec(hidden_size=16, num_hidden_layers=1, intermediate_size=32,
                                          num_attention_heads=2, num_key_value_heads=1, head_dim=8), vocab_size=50)
    with pytest.raises(ShiftkitError, match="tokenizer has 100 tokens but the model.*embeds only 50"):
        check_vocab(small, tok)


def test_scoring_alone_equals_padded_batch(pico, tok):
    prompts = ["1+2=", "12345+678=", "9*9="]
    comps = ["3:3", "8+5=13:x", "1*9=81,9:81"]
    lp_batch, mask = score_texts(pico, tok, prompts, comps)
    for i in range(3):
        lp_one, m1 = score_texts(pico, tok, [prompts[i]], [comps[i]])
        n = int(m1.sum())
        assert torch.allclose(lp_one[0, :n], lp_batch[i, :n], atol=1e-5, rtol=0)
        assert torch.all(lp_batch[i, n:] == 0)


def test_scorer_bf16_close_to_fp32(pico, tok):
    lp32, mask = score_texts(pico, tok, ["12+3="], ["2+3=5,1:15"], dtype="float32")
    lp16, _ = score_texts(pico, tok, ["12+3="], ["2+3=5,1:15"], dtype="bfloat16")
    assert lp16.dtype == torch.float32 and (lp16 - lp32).abs().max() < 0.1


def test_sampler_logprobs_match_scorer_and_rows_are_batch_invariant(pico, tok):
    prompts = ["1+2=", "345+67=", "8*7=", "1+1="]
    r = sample(pico, tok, prompts, max_new_tokens=12, row_seeds=[11, 12, 13, 14])
    lp = score(pico, r.prompt_ids_BP, r.prompt_mask_BP, r.completion_ids_BT, r.completion_mask_BT)
    assert torch.allclose(lp, r.logp_BT, atol=1e-5)
    r2 = sample(pico, tok, prompts[1:3], max_new_tokens=12, row_seeds=[12, 13])
    assert r2.texts == r.texts[1:3]
    assert r.completion_ids_BT.shape[1] <= 12
    # masks: ones then zeros, EOS included
    for b in range(4):
        m = r.completion_mask_BT[b]
        n = int(m.sum())
        assert torch.all(m[:n] == 1) and torch.all(m[n:] == 0)
        if r.eos_B[b]:
            assert r.completion_ids_BT[b, n - 1] == tok.eos_token_id


def test_kv_cache_matches_full_recompute(pico, tok):
    # greedy decode with cache vs. argmax of a full forward at each step
    r = sample(pico, tok, ["12+34="], max_new_tokens=6, greedy=True)
    ids = tok("12+34=", add_special_tokens=False)["input_ids"]
    for t in range(int(r.completion_mask_BT.sum())):
        logits = pico(torch.tensor([ids])).logits[0, -1]
        assert int(logits.argmax()) == int(r.completion_ids_BT[0, t])
        ids.append(int(r.completion_ids_BT[0, t]))


def test_temperature_and_top_p():
    from shiftkit.sampling import process_logits

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    lp = process_logits(logits, 1.0, 0.7)  # keeps {0.5, 0.3}
    assert torch.isinf(lp[0, 2:]).all() and torch.allclose(lp[0, :2].exp(), torch.tensor([0.625, 0.375]))
    lp = process_logits(logits, 0.5, 1.0)
    p = torch.tensor([0.5, 0.3, 0.15, 0.05]) ** 2
    assert torch.allclose(lp.exp(), (p / p.sum())[None], atol=1e-6)


def test_encode_padding_layout(tok):
    ids, mask = encode_prompts(tok, ["1", "123"])
    assert ids.tolist()[0][:2] == [0, 0] and mask.tolist() == [[0, 0, 1], [1, 1, 1]]
    c, cm = encode_completions(tok, ["1", "123"])
    assert cm.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]] and c[0, 1] == tok.eos_token_id


def test_inverse_cdf_with_u_exactly_zero_picks_first_token_with_mass():
    from shiftkit.sampling import inverse_cdf

    logp = torch.log(torch.tensor([[0.0, 0.0, 0.7, 0.3], [0.5, 0.5, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]))
    assert inverse_cdf(logp, torch.zeros(3)).tolist() == [2, 0, 1]
    # interior draws: [cdf_{i-1}, cdf_i) maps to token i; zero-mass tokens are never picked
    assert inverse_cdf(logp, torch.tensor([0.7, 0.5, 0.999])).tolist() == [3, 1, 1]
    assert inverse_cdf(logp, torch.tensor([0.6999, 0.4999, 0.5])).tolist() == [2, 0, 1]
    assert inverse_cdf(logp, torch.ones(3)).tolist() == [3, 1, 1]  # u rounding up to 1: last token with mass


def test_sampler_with_a_zero_uniform_never_emits_a_zero_probability_token(pico, tok, monkeypatch):
    # top_p tiny keeps only the argmax: every other token (token 0 included) has probability 0,
    # so with every uniform exactly 0 the sample must be the greedy completion
    greedy = sample(pico, tok, ["12+34="], max_new_tokens=6, greedy=True)
    real_rand = torch.rand
    monkeypatch.setattr(torch, "rand", lambda *a, **k: torch.zeros_like(real_rand(*a, **k)))
    r = sample(pico, tok, ["12+34="], max_new_tokens=6, top_p=1e-6)
    assert r.completion_ids_BT.tolist() == greedy.completion_ids_BT.tolist()
    assert torch.isfinite(r.logp_BT[r.completion_mask_BT.bool()]).all()
