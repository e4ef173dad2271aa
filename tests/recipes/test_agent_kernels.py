"""``shiftkit experiment agent-kernels`` end to end on a stand-in service.

The recipe's plumbing (behaviour cloning, single-turn GRPO, multi-turn BC -> RFT -> value pretraining
-> PPO, held-out evaluation before and after, the oracle table, the results file and plot, stages
cached on rerun) is driven against a stub of the ``kernels serve`` OpenEnv route (``POST /step``,
``GET /health``) that answers each rendered composition with a fixed reward derived from its source.
The real environment behind that route is tested in tests/kernels/test_service.py; a real profile-mode
evaluation costs about a minute, so it is not repeated here.
"""

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from shiftkit.agent import kernel_grammar as KG
from shiftkit.errors import ShiftkitError
from shiftkit.recipes.agent_kernels import AgentKernelsConfig, command, learning_verdict, run


class _Stub:
    def __init__(self):
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        stub = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, obj):
                body = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._send({"status": "ok", "pool": {"slots": 1, "stub": True}})

            def do_POST(self):
                a = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["action"]
                with stub.lock:
                    stub.requests.append(a)
                src = json.dumps(a.get("files") or a.get("solution"), sort_keys=True)
                h = int(hashlib.sha256(src.encode()).hexdigest(), 16)
                reward = [-1.0, 1.0, 2.0, 3.0][h % 4] if a["mode"] == "profile" else [-1.0, 1.0][h % 2]
                self._send({"observation": {"result": {"reward": reward, "reason": "stub", "findings": []}}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def stub():
    s = _Stub()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def _cfg(out, url) -> AgentKernelsConfig:
    return AgentKernelsConfig(out=str(out), seeds=[0], train_problems=["g_ew_clamp_1024x1024"],
                              heldout_problems=["g_ew_relu6_1024x768"], kernel_env_url=url, sft_rows=256, sft_steps=80,
                              demo_episodes=32, rft_episodes=16, rft_steps=2, st_steps=2, mt_steps=1, group_size=4,
                              value_pretrain_steps=1, eval_samples=4, progress=False)


def test_agent_kernels_runs_every_stage_and_reruns_from_its_cache(tmp_path, stub):
    res = run(_cfg(tmp_path, stub.url))
    seed = res["per_seed"]["0"]
    for pipe, keys in (("single_turn", ("before", "after")), ("multi_turn", ("before", "after_rft", "after"))):
        for k in keys:
            assert seed[pipe][k]["n"] == 4, (pipe, k)  # eval_samples x held-out problems
            assert -1.0 <= seed[pipe][k]["reward"] <= 3.0
    assert len(seed["single_turn"]["train_curve"]) == 2 and len(seed["multi_turn"]["train_curve"]) == 1
    table = res["oracle"]["table"]["g_ew_relu6_1024x768"]
    assert len(table) == len(KG.all_compositions())
    assert res["oracle"]["best_mean"] == max(v for v in table.values() if v is not None)
    modes = {a["mode"] for a in stub.requests}
    assert modes == {"profile", "verify"}  # the reward profiles; the agent's tool verifies
    assert all(a["config"] == KG.TASK_EVAL_CONFIG for a in stub.requests if a["mode"] == "profile")  # the task's timing budget
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["single_turn"]["reward_after"]["per_seed"] == [seed["single_turn"]["after"]["reward"]]
    assert saved["command"].startswith("shiftkit experiment agent-kernels") and (tmp_path / "agent_kernel_rl.png").is_file()
    # rerun: every stage comes from `out`; only the oracle table is asked again
    n = len(stub.requests)
    again = run(_cfg(tmp_path, stub.url))
    assert len(stub.requests) - n == len(KG.all_compositions())
    assert again["per_seed"]["0"]["multi_turn"] == json.loads(json.dumps(seed["multi_turn"]))


def test_agent_kernels_config_errors_name_the_key(tmp_path):
    with pytest.raises(ShiftkitError, match="unknown grammar problem"):
        run(AgentKernelsConfig(out=str(tmp_path), train_problems=["nope"]))
    with pytest.raises(ShiftkitError, match="overlap"):
        run(AgentKernelsConfig(out=str(tmp_path), train_problems=["g_ew_relu6_1024x768"]))
    assert command(AgentKernelsConfig(seeds=[0])) == "shiftkit experiment agent-kernels seeds=[0]"


def test_learning_verdict_hand_computed_and_degenerate():
    v = learning_verdict([0.0, -0.5, 0.25], [1.0, 0.5, 1.5])  # changes 1, 1, 1.25: mean 1.0833, sd 0.1443
    assert v["changes"] == [1.0, 1.0, 1.25] and abs(v["sd_change"] - 0.144338) < 1e-6 and v["verdict"] == "shown"
    assert learning_verdict([0.0, 0.0, 0.0], [1.0, 2.0, -0.1])["verdict"] == "not shown"  # one seed down
    assert learning_verdict([0.0, 0.0, 0.0], [0.1, 2.0, 0.2])["verdict"] == "not shown"  # mean 0.77 < 2 sd 2.15
    assert learning_verdict([0.0], [3.0])["verdict"] == "not shown"  # degenerate: one seed shows nothing
