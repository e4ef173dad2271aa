"""The kernel reward inside verl: verl 0.9.1's own loader (``verl.trainer.ppo.reward.get_custom_reward_fn``,
config keys under ``reward.custom_reward_function``, ``reward_kwargs`` merged into every call) and its own
``NaiveRewardManager`` (``verl/workers/reward_manager/naive.py``: decodes each response, calls
``compute_score(data_source=, solution_str=, ground_truth=, extra_info=)``, puts ``score`` at the last valid
response token and the other keys in ``reward_extra_info``) score a verl ``DataProto`` through
:mod:`shiftkit.integrations.verl_kernel_score` against a served environment (``KernelService`` over HTTP,
in this process). The rewards equal the service's own verdicts for the same completions."""

import json
import threading
import urllib.error
from pathlib import Path

import numpy as np
import pytest
import torch

verl = pytest.importorskip("verl", reason="verl is an optional test dependency (Makefile: --no-deps verl==0.9.1)")

from shiftkit.integrations import verl_kernel_score as vks  # noqa: E402
from shiftkit.kernels.service import KernelService, ServeJob, make_server  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "shiftkit/kernels/fixtures"
PROBLEM = (FIX / "problems/scale_shift_clamp.py").read_text()
CORRECT = (FIX / "solutions/scale_shift_clamp/correct.py").read_text()
WRONG = CORRECT.replace("v < -1.f ? -1.f : (v > 1.f ? 1.f : v)", "v")  # no clamp: wrong outputs
assert WRONG != CORRECT
CFG = {"secret_seed": 5, "trials": 2}


class ByteTok:
    """What verl's reward manager needs of a tokenizer: ``decode``. Bytes as ids, 0 is padding."""
    pad_token_id = 0

    def encode(self, s: str) -> list[int]:
        return list(s.encode())

    def decode(self, ids, skip_special_tokens=True) -> str:
        return bytes(int(i) for i in ids if int(i) != 0).decode()


@pytest.fixture(scope="module")
def served():
    svc = KernelService(ServeJob(port=0, slots=1, token="t0k"))
    httpd = make_server(svc)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    svc.close()


def _batch(tok, responses: list[str], extra: list[dict]):
    from verl import DataProto

    P = 4
    T = max(len(tok.encode(r)) for r in responses) + 3  # right padding on every row
    prompts = torch.full((len(responses), P), 65)
    resp = torch.zeros(len(responses), T, dtype=torch.long)
    mask = torch.zeros(len(responses), P + T, dtype=torch.long)
    mask[:, :P] = 1
    for i, r in enumerate(responses):
        ids = tok.encode(r)
        resp[i, :len(ids)] = torch.tensor(ids)
        mask[i, P:P + len(ids)] = 1
    n = len(responses)
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": resp, "attention_mask": mask},
        non_tensors={"data_source": np.array(["kernelbench"] * n, dtype=object),
                     "reward_model": np.array([{"ground_truth": ""}] * n, dtype=object),
                     "extra_info": np.array(extra, dtype=object)}), mask[:, P:].sum(-1)


def test_verl_loads_and_its_reward_manager_scores_through_the_served_environment(served):
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.workers.reward_manager.naive import NaiveRewardManager

    config = OmegaConf.create({"reward": {"custom_reward_function": {
        "path": vks.__file__, "name": "compute_score",
        "reward_kwargs": {"url": served, "token": "t0k", "mode": "verify", "config": CFG}}}})
    fn = get_custom_reward_fn(config)
    tok = ByteTok()
    fence = lambda src: f"Here is my kernel.\n```python\n{src}\n```\n"  # noqa: E731
    responses = [fence(CORRECT), fence(WRONG), "I cannot write this kernel."]
    info = {"problem": PROBLEM, "problem_name": "scale_shift_clamp"}
    data, lengths = _batch(tok, responses, [dict(info) for _ in responses])
    out = NaiveRewardManager(tok, num_examine=0, compute_score=fn)(data, return_dict=True)
    r_BT = out["reward_tensor"]
    scores = [float(r_BT[i, lengths[i] - 1]) for i in range(len(responses))]
    assert float(r_BT.abs().sum()) == pytest.approx(sum(abs(s) for s in scores))  # nothing anywhere else
    # the service's own verdicts for the same completions
    want = []
    for c in responses:
        req = vks.urllib.request.Request(served + "/step", json.dumps(vks.step_body(c, info, "verify", CFG)).encode(),
                                         {"Content-Type": "application/json", "Authorization": "Bearer t0k"})
        with vks.urllib.request.urlopen(req, timeout=300) as f:
            want.append(json.load(f)["reward"])
    assert scores == want and want[0] == 1.0 and want[1] == -1.0 and want[2] == -1.0
    assert out["reward_extra_info"]["kernel_correct"] == [1.0, 0.0, 0.0]
    assert out["reward_extra_info"]["kernel_compiled"] == [1.0, 1.0, 0.0]


def test_environment_failures_raise_instead_of_scoring(served):
    info = {"problem": PROBLEM}
    with pytest.raises(RuntimeError, match="answered 401"):  # the token is checked
        vks.compute_score("k", "x", "", info, url=served, token="wrong", mode="verify")
    with pytest.raises(RuntimeError, match="answered 400|answered 422"):  # a bad request: the detail is kept
        vks.compute_score("k", "```python\nclass ModelNew: pass\n```", "", {"problem": "x = 1"}, url=served,
                          token="t0k", mode="verify")
    with pytest.raises(RuntimeError, match="unreachable"):
        vks.compute_score("k", "x", "", info, url="http://127.0.0.1:9", mode="verify", timeout=5)
    with pytest.raises(RuntimeError, match="gave no reward"):  # compile mode has no reward
        vks.compute_score("k", f"```python\n{CORRECT}\n```", "", info, url=served, token="t0k", mode="compile")


@pytest.mark.parametrize("kw, msg", [({"extra_info": {}}, "neither 'problem'"), ({"mode": "run"}, "mode='run'"),
                                     ({"url": ""}, "no url")])
def test_bad_settings_are_one_line_errors(kw, msg):
    args = {"data_source": "k", "solution_str": "x", "ground_truth": "", "extra_info": {"problem": PROBLEM},
            "url": "http://127.0.0.1:9", **kw}
    with pytest.raises(ValueError, match=msg):
        vks.compute_score(**args)


def test_a_full_queue_is_retried_then_raised(monkeypatch):
    calls = []

    def full(req, timeout):
        calls.append(req.full_url)
        raise urllib.error.HTTPError(req.full_url, 503, "busy", {}, None)

    monkeypatch.setattr(vks.urllib.request, "urlopen", full)
    monkeypatch.setattr(vks.time, "sleep", lambda s: None)
    with pytest.raises(RuntimeError, match="answered 503"):
        vks.compute_score("k", "x", "", {"problem": PROBLEM}, url="http://h:1", retries=2)
    assert calls == ["http://h:1/step"] * 3
