"""Rollouts from a served model (``shiftkit serve`` in a separate process, slow tier; in a thread, fast tier): the same tokens as the local
sampler, a log-prob gap of ~0 to the trainer, a gap after a trainer step that only a weight sync closes,
one-line errors, and :func:`shiftkit.remote.logprob_gap` on hand-computed values."""

import contextlib
import copy
import os
import socket
import subprocess
import sys
import time
import types

import pytest
import torch

from shiftkit import loopkit as kit
from shiftkit.dist import Dist
from shiftkit.errors import ShiftkitError
from shiftkit.models import TinyModelSpec, make_char_tokenizer, make_tiny_model, save_model
from shiftkit.remote import RolloutClient, logprob_gap, post_json
from shiftkit.sampling import score
from shiftkit.serve import CompletionServer, JSONServer

TOKEN = "test-token"  # the servers' token (SHIFTKIT_SERVE_TOKEN for the process, token= for the thread)
SPEC = TinyModelSpec(hidden_size=32, num_hidden_layers=2, intermediate_size=64, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=8)
ONE = Dist()  # one process (the real launcher-free Dist: shard, is_main, barrier, gathered)
PROMPTS = ["Q:12+7=", "Q:3*4=", "hello"]
KW = dict(max_new_tokens=10, temperature=1.0)


def _port() -> int:
    with socket.socket() as s:  # the free_port fixture's recipe; this fixture is module-scoped
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_process(path):
    """``python -m shiftkit serve`` in its own process; returns (url, stop)."""
    port = _port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "SHIFTKIT_SERVE_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "shiftkit", "serve", "--model", str(path), "--port", str(port),
                             "threads=1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)

    def stop():
        proc.kill()
        proc.wait()
        proc.stderr.close()
    try:
        t0 = time.time()
        while True:
            try:
                post_json(f"http://127.0.0.1:{port}/health", None, 2)
                return f"http://127.0.0.1:{port}/v1", stop
            except ShiftkitError:
                if proc.poll() is not None or time.time() - t0 > 60:
                    raise RuntimeError(f"server did not start: {proc.stderr.read().decode()[-2000:]}") from None
                time.sleep(0.2)
    except BaseException:
        stop()
        raise


def _start_thread(path):
    """The same server in a thread of this process (the fast tier); its model is loaded from ``path``."""
    from shiftkit.models import load_model_and_tokenizer

    s = CompletionServer(*load_model_and_tokenizer(path), name="tiny", weights=str(path), token=TOKEN).start()
    return s.url, s.stop


AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module", params=[pytest.param("process", marks=pytest.mark.slow), "thread"])
def served(request, tmp_path_factory):
    """``shiftkit serve`` on a tiny Qwen3 (saved to disk, loaded by the server); yields (client, model, tok)."""
    tok = make_char_tokenizer()
    model = make_tiny_model(SPEC, vocab_size=len(tok), seed=0)
    path = tmp_path_factory.mktemp("served") / "model"
    save_model(model, tok, path)
    url, stop = (_start_process if request.param == "process" else _start_thread)(path)
    try:
        yield RolloutClient(url, timeout=30, token=TOKEN), model, tok
    finally:
        stop()


def _assert_same_rollouts(a, b):
    for f in ("prompt_ids_BP", "prompt_mask_BP", "completion_ids_BT", "completion_mask_BT", "eos_B"):
        assert torch.equal(getattr(a, f), getattr(b, f)), f
    assert a.texts == b.texts
    assert torch.allclose(a.logp_BT, b.logp_BT, atol=1e-5)


def _gap(roll, model, temperature=1.0):
    args = (roll.prompt_ids_BP, roll.prompt_mask_BP, roll.completion_ids_BT, roll.completion_mask_BT)
    return logprob_gap(roll.logp_BT, score(model, *args, temperature=temperature), roll.completion_mask_BT)


def test_remote_rollouts_equal_local_ones(served):
    client, model, tok = served
    mine, roll = client.rollout(tok, PROMPTS, 3, 7, 2, ONE, **KW)
    mine_l, local = kit.rollout(model, tok, PROMPTS, 3, 7, 2, ONE, **KW)
    assert mine == mine_l == [0, 1, 2] and roll.completion_ids_BT.shape[0] == 9
    _assert_same_rollouts(roll, local)
    assert len(set(map(tuple, roll.completion_ids_BT.tolist()))) > 1  # the rows are really sampled
    assert _gap(roll, model)["max_abs"] < 1e-4
    # token-id prompts, a rank's share (rank 1 of 2), temperature and top-p
    rank1 = types.SimpleNamespace(shard=lambda xs: xs[1::2], device=torch.device("cpu"),
                                  gathered=lambda *models: contextlib.nullcontext())
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]
    kw = dict(max_new_tokens=8, temperature=0.7, top_p=0.9)
    mine, roll = client.rollout(tok, ids, 2, 3, 5, rank1, **kw)
    _, local = kit.rollout(model, tok, ids, 2, 3, 5, rank1, **kw)
    assert mine == [1]
    _assert_same_rollouts(roll, local)
    # many rows at once: the client opens `concurrency` connections together (the server's listen backlog)
    many = [f"Q:{i}+{i}=" for i in range(16)]
    _assert_same_rollouts(client.rollout(tok, many, 4, 0, 0, ONE, **KW)[1], kit.rollout(model, tok, many, 4, 0, 0, ONE, **KW)[1])


@pytest.mark.parametrize("sync", ["sglang", "vllm"])
def test_the_gap_opens_after_a_trainer_step_and_sync_closes_it(served, tmp_path, sync):
    """Both weight-sync routes ``shiftkit serve`` speaks: SGLang's update_weights_from_disk and vLLM's
    dev-mode collective_rpc reload_weights (the vLLM contract itself: tests/test_engine_contracts.py)."""
    client0, model, tok = served
    client = RolloutClient(client0.base, timeout=30, token=TOKEN, sync=sync)
    trainer = copy.deepcopy(model)
    opt = torch.optim.SGD(trainer.parameters(), lr=0.5)
    _, roll = kit.rollout(trainer, tok, PROMPTS, 2, 1, 0, ONE, **KW)
    loss = -score(trainer, roll.prompt_ids_BP, roll.prompt_mask_BP, roll.completion_ids_BT, roll.completion_mask_BT,
                  grad=True).sum()
    loss.backward()
    opt.step()
    try:
        _, stale = client.rollout(tok, PROMPTS, 2, 1, 1, ONE, **KW)
        assert _gap(stale, trainer)["mean_abs"] > 1e-2  # the server still samples from the old weights
        v0 = post_json(client.root + "/health", None, 5)["weight_version"]
        client.sync_weights(trainer, tok, tmp_path / "rollout_weights", ONE)
        assert post_json(client.root + "/health", None, 5)["weight_version"] == v0 + 1
        _, fresh = client.rollout(tok, PROMPTS, 2, 1, 1, ONE, **KW)
        _assert_same_rollouts(fresh, kit.rollout(trainer, tok, PROMPTS, 2, 1, 1, ONE, **KW)[1])
        assert _gap(fresh, trainer)["max_abs"] < 1e-4
    finally:  # the module's other tests expect the original weights
        client.sync_weights(model, tok, tmp_path / "original", ONE)


def test_a_lora_policy_syncs_as_its_merged_weights(served, tmp_path):
    peft = pytest.importorskip("peft")
    client, model, tok = served
    lora = peft.get_peft_model(copy.deepcopy(model), peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"],
                                                                     init_lora_weights=False))
    try:
        client.sync_weights(lora, tok, tmp_path / "merged", ONE)
        assert hasattr(lora, "peft_config") and any("lora_" in n for n, _ in lora.named_parameters())  # not merged
        _, roll = client.rollout(tok, PROMPTS, 2, 4, 0, ONE, **KW)
        assert _gap(roll, lora)["max_abs"] < 1e-4 and _gap(roll, model)["max_abs"] > 1e-3
    finally:
        client.sync_weights(model, tok, tmp_path / "original", ONE)


def test_grpo_with_served_rollouts_equals_the_in_process_run(served, tmp_path, monkeypatch):
    """Active once shiftkit/rl.py has ``rollout_url`` (GRPOConfig): the run syncs the server to its policy
    (here through vLLM's route, ``rollout_sync=vllm``), so its metrics and final weights are the
    in-process run's, with a log-prob gap of ~0 every step."""
    import dataclasses
    import json

    from safetensors.torch import load_file

    from shiftkit.rl import GRPOConfig, run_grpo

    if "rollout_url" not in {f.name for f in dataclasses.fields(GRPOConfig)}:
        pytest.skip("shiftkit/rl.py does not take rollout_url yet")
    client, model, tok = served
    monkeypatch.setenv("SHIFTKIT_SERVE_TOKEN", TOKEN)  # how a trainer gets the server's token
    (tmp_path / "parity_reward.py").write_text("def parity(completions, **kw):\n"
                                               "    return [float(len(c) % 2) for c in completions]\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # a reward with signal for the untrained model
    save_model(model, tok, tmp_path / "start")

    def run(out, **kw):
        run_grpo(GRPOConfig(model=str(tmp_path / "start"), out=str(tmp_path / out), data="arith:add",
                            reward=["parity_reward:parity"], steps=3, prompts_per_step=4, group_size=4,
                            max_new_tokens=12, lr=1e-2, eval_every=0, progress=False, threads=1, **kw))
        rows = [json.loads(x) for x in (tmp_path / out / "metrics.jsonl").read_text().splitlines()]
        return rows, load_file(str(tmp_path / out / "final" / "model.safetensors"))

    try:
        (local, a), (remote, b) = run("local"), run("remote", rollout_url=client.base, rollout_sync="vllm")
    finally:
        client.sync_weights(model, tok, tmp_path / "original", ONE)
    drop = lambda r: {k: v for k, v in r.items() if not k.startswith(("time/", "step_time", "rollout/"))}  # noqa: E731
    assert [drop(r) for r in local] == [drop(r) for r in remote] and any(r["frac_groups_with_signal"] for r in local)
    assert max(r["rollout/logprob_gap_max_abs"] for r in remote) < 1e-4
    assert all(torch.equal(a[k], b[k]) for k in a) and any(not torch.equal(a[k], model.state_dict()[k]) for k in a)
    assert (tmp_path / "remote" / "final").is_dir() and not (tmp_path / "remote" / "rollout_weights").exists()


@pytest.mark.parametrize("command", ["rl", "agent"])
def test_an_unreachable_rollout_url_fails_before_anything_is_written(tmp_path, capsys, command):
    """No server on the port: one line naming rollout_url, exit 2, no run directory (and no weight copy)."""
    from shiftkit.cli import main

    url = f"http://127.0.0.1:{_port()}/v1"
    argv = (["rl", "--model", str(tmp_path / "not_loaded"), "tasks=add:1", f"rollout_url={url}"]
            if command == "rl" else ["agent", "train", f"rollout_url={url}"])
    assert main([*argv, f"out={tmp_path / 'run'}"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: rollout_url={url}: ") and "unreachable" in lines[0], lines
    assert not (tmp_path / "run").exists()


def test_errors_are_one_line(served, tmp_path):
    client, model, tok = served
    down = RolloutClient(f"http://127.0.0.1:{_port()}/v1", timeout=3, model="m")
    with pytest.raises(ShiftkitError, match="unreachable") as e:
        down.rollout(tok, PROMPTS, 2, 0, 0, ONE, **KW)
    assert "\n" not in str(e.value)
    with pytest.raises(ShiftkitError, match="HTTP 400.*not a model directory") as e:
        post_json(client.root + "/update_weights_from_disk", {"model_path": str(tmp_path / "missing")}, 10, AUTH)
    assert "\n" not in str(e.value)
    other = make_tiny_model(TinyModelSpec(hidden_size=16, num_hidden_layers=1, intermediate_size=32, num_attention_heads=2,
                                          num_key_value_heads=1, head_dim=8), vocab_size=len(tok))
    with pytest.raises(ShiftkitError, match="another architecture"):
        client.sync_weights(other, tok, tmp_path / "other", ONE)
    _, roll = client.rollout(tok, PROMPTS[:1], 2, 0, 0, ONE, **KW)  # the old weights still serve
    assert _gap(roll, model)["max_abs"] < 1e-4
    with pytest.raises(ShiftkitError, match="HTTP 400.*prompt must be"):
        post_json(client.base + "/completions", {"prompt": [], "max_tokens": 2}, 10)
    with pytest.raises(ShiftkitError, match="HTTP 401.*token"):  # the weight route needs the token, even on loopback
        RolloutClient(client.base, timeout=10, token="").sync_weights(model, tok, tmp_path / "no_token", ONE)


def test_responses_without_token_ids_or_logprobs_are_named_errors():
    """An in-process stub answers every completion with ``answer[0]``: vLLM's shape parses, a server
    that ignores ``return_token_ids`` or ``logprobs`` is a named error."""
    tok = make_char_tokenizer()
    vllm_shape = {"index": 0, "text": "ab", "finish_reason": "length", "stop_reason": None, "token_ids": [40, 41],
                  "prompt_token_ids": [5], "logprobs": {"text_offset": [0, 1], "token_logprobs": [-0.5, -1.0],
                                                        "tokens": ["a", "b"], "top_logprobs": [{"a": -0.5}, {"b": -1.0}]}}
    answer = [vllm_shape]
    s = JSONServer()
    s.routes = {("POST", "/v1/completions"): lambda body: (200, {"choices": [answer[0]]})}
    s.start()
    try:
        c = RolloutClient(s.url, timeout=5, model="m")
        r = c.sample(tok, [[5]], max_new_tokens=2, temperature=1.0, row_seeds=[0])
        assert r.completion_ids_BT.tolist() == [[40, 41]] and r.logp_BT.tolist() == [[-0.5, -1.0]]
        assert r.eos_B.tolist() == [False] and r.texts == ["ab"]
        for choice, err in [({**vllm_shape, "token_ids": None}, "return_token_ids"),
                            ({**vllm_shape, "logprobs": None}, "logprobs=0")]:
            answer[0] = choice
            with pytest.raises(ShiftkitError, match=err):
                c.sample(tok, [[5]], max_new_tokens=2, temperature=1.0, row_seeds=[0])
    finally:
        s.stop()


def test_logprob_gap_by_hand():
    r = torch.tensor([[0.0, -1.0, -2.0], [-0.5, 0.0, 0.0]])
    t = torch.tensor([[-0.1, -1.5, -9.0], [-0.25, 3.0, 0.0]])
    m = torch.tensor([[1, 1, 0], [1, 0, 0]])
    g = logprob_gap(r, t, m)  # valid diffs: 0.1, 0.5, -0.25
    assert g["mean_abs"] == pytest.approx(0.85 / 3) and g["max_abs"] == pytest.approx(0.5)
    assert g["mean_signed"] == pytest.approx(0.35 / 3)
    assert logprob_gap(r, t, torch.zeros_like(m)) == {"mean_abs": 0.0, "max_abs": 0.0, "mean_signed": 0.0}


def test_unknown_sync_protocol_is_an_error_naming_it():
    with pytest.raises(ShiftkitError, match="rollout_sync='nccl' is not a weight-sync protocol.*sglang, vllm"):
        RolloutClient("http://127.0.0.1:1/v1", sync="nccl")


def test_serve_needs_a_model(capsys):
    from shiftkit.cli import main

    assert main(["serve"]) == 2
    assert capsys.readouterr().err.strip() == "error: serve needs model=<HF model dir> (or --model DIR)"
