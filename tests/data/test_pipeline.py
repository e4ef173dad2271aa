"""The layers together, as a command will call them: data -> prompt ids -> sampler -> rewards -> eval report.
A tiny untrained model; what is checked is that every stage sees the same rows and ids."""

import json

import pytest
import torch

from shiftkit.data import DataArgs, load_eval, load_prompts
from shiftkit.metrics import eval_report
from shiftkit.models import make_char_tokenizer, make_tiny_model
from shiftkit.prompts import PromptRenderer
from shiftkit.rewards import Rewards
from shiftkit.sampling import sample


@pytest.fixture(scope="module")
def tiny():
    tok = make_char_tokenizer()
    return make_tiny_model(vocab_size=len(tok), seed=0).eval(), tok


def test_user_data_through_every_layer(tmp_path, tiny):
    model, tok = tiny
    p = tmp_path / "wp.jsonl"
    p.write_text("".join(json.dumps({"question": f"{a}+{a}=", "answer": str(2 * a), "domain": "add" if a % 2 else "x"})
                         + "\n" for a in range(1, 5)))
    data = DataArgs(data=str(p), prompt_key="question", shuffle=False)
    rewards = Rewards(["math", "format"], [1.0, 0.5])
    ds = load_prompts(data, need_answer=rewards.need_answer())
    rewards.check_columns(ds.columns, ds.name)
    r = PromptRenderer(tok, template="Q: {prompt}\nA:")
    batch = ds.draw(seed=0, step=0, n=2)
    roll = sample(model, tok, [r.text(e.prompt) for e in batch], max_new_tokens=6, greedy=True)
    for b, e in enumerate(batch):  # the sampler saw exactly the renderer's ids
        assert roll.prompt_ids_BP[b][roll.prompt_mask_BP[b].bool()].tolist() == r.ids(e.prompt)
    res = rewards.score(batch, roll.texts, completion_ids=[x.tolist() for x in roll.completion_ids_BT])
    assert len(res.total) == 2 and "rewards/math/mean" in res.metrics

    ev = load_eval(data)
    K = 3
    g = sample(model, tok, [r.text(e.prompt) for e in ev], max_new_tokens=6, greedy=True)
    s = sample(model, tok, [r.text(e.prompt) for e in ev for _ in range(K)], max_new_tokens=6, seed=1)
    lens, eos = s.completion_mask_BT.sum(-1).tolist(), s.eos_B.tolist()
    summary, rows = eval_report(
        ev, rewards, greedy=(g.texts, g.completion_mask_BT.sum(-1).tolist(), g.eos_B.tolist()),
        samples=([s.texts[i * K:(i + 1) * K] for i in range(len(ev))], [lens[i * K:(i + 1) * K] for i in range(len(ev))],
                 [eos[i * K:(i + 1) * K] for i in range(len(ev))]))
    for key in ("greedy_acc", "avg@3", "pass@1", "pass@2", "truncation_rate", "response_length/mean",
                "greedy_acc/add", "greedy_acc/x", "rewards/math/mean"):
        assert key in summary, key
    assert summary["truncation_rate"] == pytest.approx(1 - sum(eos) / len(eos))
    assert len(rows) == 4 and len(rows[0]["samples"]) == 3 and rows[0]["answer"] == "2"
    assert json.dumps(rows) and json.dumps(summary)  # writable as JSONL / JSON


def test_eval_report_by_hand():
    from shiftkit.data import Example

    ex = [Example("q1", "4", {"answer": "4", "domain": "a"}, "w1"), Example("q2", "5", {"answer": "5", "domain": "b"}, "w2")]
    summary, rows = eval_report(ex, Rewards(["math"]), greedy=(["Answer: 4", "Answer: 4"], [3, 9], [True, False]),
                                samples=([["Answer: 4", "4", "Answer: 1"], ["5", "no", "no"]],
                                         [[1, 2, 3], [4, 5, 6]], [[True] * 3, [True, True, False]]))
    assert summary["greedy_acc"] == 0.5 and summary["greedy_acc/a"] == 1.0 and summary["greedy_acc/b"] == 0.0
    assert summary["greedy_truncation_rate"] == 0.5
    assert summary["avg@3"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert summary["pass@3"] == 1.0 and summary["truncation_rate"] == pytest.approx(1 / 6)
    assert rows[0]["n_correct"] == 2 and rows[1]["sample_rewards"] == [1.0, 0.0, 0.0]
    assert rows[1]["greedy_truncated"] is True
    torch.manual_seed(0)
