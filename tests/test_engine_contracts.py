"""``rollout_sync=vllm`` against a fake vLLM server that implements exactly the routes it uses.

Mirrored engine: **vLLM 0.33.0** (the PyPI wheel ``vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl``), files:

* ``vllm/entrypoints/serve/dev/rpc/api_router.py``: ``POST /collective_rpc``; the body must be a JSON
  object with ``method`` (400 ``{"detail": ...}`` otherwise), ``args`` (default []), ``kwargs`` (default
  {}), ``timeout``; the method runs on every worker and the answer is ``{"results": [...]}``, one per
  worker (None / dict / list as is, anything else ``str()``); a worker's exception is a 500.
* ``vllm/v1/worker/gpu_worker.py`` ``Worker.reload_weights(*args, **kwargs)`` ->
  ``vllm/v1/worker/gpu_model_runner.py`` ``reload_weights(weights_iterator=None, weights_path=None,
  is_checkpoint_format=True)`` -> ``vllm/model_executor/model_loader/reload/inplace.py``: the weights are
  loaded in place from ``weights_path`` (which becomes ``model_config.model``); returns None.
* ``vllm/entrypoints/serve/dev/cache/api_router.py``: ``POST /reset_prefix_cache`` (query parameters
  only) -> ``{"success": bool}``; false while cache blocks are held, "callers may retry".
* ``vllm/entrypoints/launchers/api_server/routers.py``: the dev routes exist only with
  ``VLLM_SERVER_DEV_MODE=1`` (else FastAPI's 404 ``{"detail": "Not Found"}``).
* ``vllm/entrypoints/serve/middleware/authenticate.py``: ``--api-key`` is checked (``Authorization:
  Bearer``) only on paths under ``/v1``, ``/v2``, ``/inference``, ``/cohere``; 401 ``{"error": "Unauthorized"}``.
* ``vllm/entrypoints/openai/completion/protocol.py`` ``CompletionResponseChoice``: ``token_ids`` and
  ``prompt_token_ids`` with ``return_token_ids``; ``logprobs.token_logprobs``.

The fake's workers really load the weights (two workers, like tensor parallel 2), so the test shows
the trainer's weights arrive, and the client's requests are recorded and compared field by field.
"""

import copy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import torch

from shiftkit import loopkit as kit
from shiftkit.dist import Dist
from shiftkit.errors import ShiftkitError
from shiftkit.models import TinyModelSpec, load_model, make_char_tokenizer, make_tiny_model
from shiftkit.remote import RolloutClient
from shiftkit.sampling import score
from shiftkit.serve import CompletionServer

API_KEY = "vllm-api-key"
SPEC = TinyModelSpec(hidden_size=32, num_hidden_layers=1, intermediate_size=64, num_attention_heads=2,
                     num_key_value_heads=1, head_dim=16)
ONE = Dist()  # one process (the real launcher-free Dist: shard, is_main, barrier, gathered)
PROMPTS = ["Q:12+7=", "hello"]
KW = dict(max_new_tokens=6, temperature=1.0)
GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere")  # authenticate.py


class FakeWorker:
    """``Worker.reload_weights`` -> ``GPUModelRunner.reload_weights`` (signature as in vLLM 0.33.0)."""

    def __init__(self, model):
        self.model = model

    def reload_weights(self, weights_iterator=None, weights_path=None, is_checkpoint_format=True):
        if weights_iterator is not None or not is_checkpoint_format:
            raise NotImplementedError("the fake reloads checkpoint-format weights from disk only")
        if not any(Path(weights_path).glob("*.safetensors")):  # DefaultModelLoader finds no weights: an exception
            raise RuntimeError(f"Cannot find any model weights with `{weights_path}`")
        self.model.load_state_dict(load_model(weights_path).state_dict())
        return None


class FakeVLLM:
    """``vllm serve`` 0.33.0 as seen by :class:`shiftkit.remote.RolloutClient` (see the module docstring)."""

    def __init__(self, model, tok, name="policy", dev_mode=True, world_size=2):
        self.workers = [FakeWorker(copy.deepcopy(model)) for _ in range(world_size)]
        self.sampler = CompletionServer(self.workers[0].model, tok, name=name)  # only its sampling is used
        self.sampler.httpd.server_close()
        self.name, self.dev_mode, self.requests = name, dev_mode, []
        self.reset_answers: list[bool] = []  # scripted /reset_prefix_cache answers (then True)
        fake = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _json(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method):
                url = urlsplit(self.path)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else b""
                fake.requests.append({"method": method, "path": url.path, "query": parse_qs(url.query),
                                      "auth": self.headers.get("Authorization"), "raw": raw})
                if url.path.startswith(GUARDED_PREFIX) and self.headers.get("Authorization") != f"Bearer {API_KEY}":
                    return self._json(401, {"error": "Unauthorized"})
                route = {("GET", "/v1/models"): fake.models, ("POST", "/v1/completions"): fake.completions}
                if fake.dev_mode:
                    route |= {("POST", "/collective_rpc"): fake.collective_rpc,
                              ("POST", "/reset_prefix_cache"): fake.reset_prefix_cache}
                fn = route.get((method, url.path))
                if fn is None:
                    return self._json(404, {"detail": "Not Found"})
                try:
                    code, obj = fn(raw)
                except Exception:  # noqa: BLE001 - FastAPI/Starlette's unhandled-exception answer
                    data = b"Internal Server Error"
                    self.send_response(500)
                    self.send_header("Content-Type", "text/plain; charset=utf-8")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self._json(code, obj)

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def models(self, _raw):
        return 200, {"object": "list", "data": [{"id": self.name, "object": "model", "owned_by": "vllm",
                                                 "root": self.name, "parent": None, "max_model_len": 256}]}

    def completions(self, raw):
        self.sampler.model = self.workers[0].model
        return self.sampler.completions(json.loads(raw))

    def collective_rpc(self, raw):  # dev/rpc/api_router.py
        try:
            body = json.loads(raw)
        except json.JSONDecodeError as e:
            return 400, {"detail": f"JSON decode error: {e}"}
        if not isinstance(body, dict):
            return 400, {"detail": "Request body must be a JSON object"}
        method = body.get("method")
        if method is None:
            return 400, {"detail": "Missing 'method' in request body"}
        args, kwargs = body.get("args", []), body.get("kwargs", {})
        results = [getattr(w, method)(*args, **kwargs) for w in self.workers]  # an exception -> 500
        return 200, {"results": [r if r is None or isinstance(r, (dict, list)) else str(r) for r in results]}

    def reset_prefix_cache(self, _raw):  # dev/cache/api_router.py
        return 200, {"success": self.reset_answers.pop(0) if self.reset_answers else True}


@pytest.fixture()
def world():
    tok = make_char_tokenizer()
    model = make_tiny_model(SPEC, vocab_size=len(tok), seed=0)
    fake = FakeVLLM(model, tok)
    try:
        yield fake, model, tok
    finally:
        fake.stop()


def _step(model, tok):
    """One SGD step of a copy of ``model`` on its own samples: a trainer whose weights moved."""
    trainer = copy.deepcopy(model)
    _, roll = kit.rollout(trainer, tok, PROMPTS, 2, 1, 0, ONE, **KW)
    (-score(trainer, roll.prompt_ids_BP, roll.prompt_mask_BP, roll.completion_ids_BT, roll.completion_mask_BT,
            grad=True).sum()).backward()
    torch.optim.SGD(trainer.parameters(), lr=0.5).step()
    return trainer


def test_vllm_sync_speaks_collective_rpc_reload_weights_and_resets_the_prefix_cache(world, tmp_path, monkeypatch):
    fake, model, tok = world
    monkeypatch.chdir(tmp_path)  # a relative run directory: the server gets the absolute path
    client = RolloutClient(fake.url, timeout=30, sync="vllm", token=API_KEY)
    _, roll = client.rollout(tok, PROMPTS, 2, 3, 0, ONE, **KW)
    assert torch.equal(roll.completion_ids_BT, kit.rollout(model, tok, PROMPTS, 2, 3, 0, ONE, **KW)[1].completion_ids_BT)
    trainer = _step(model, tok)
    fake.requests.clear()
    client.sync_weights(trainer, tok, Path("rollout_weights"), ONE)
    # the requests, field by field
    assert [(r["method"], r["path"]) for r in fake.requests] == [("POST", "/collective_rpc"), ("POST", "/reset_prefix_cache")]
    rpc = json.loads(fake.requests[0]["raw"])
    path = str((tmp_path / "rollout_weights").resolve())
    assert rpc == {"method": "reload_weights", "kwargs": {"weights_path": path}}
    assert Path(path).is_absolute() and any(Path(path).glob("*.safetensors")) and (Path(path) / "config.json").is_file()
    assert fake.requests[1]["query"] == {} and json.loads(fake.requests[1]["raw"] or b"{}") == {}
    assert all(r["auth"] == f"Bearer {API_KEY}" for r in fake.requests)
    # the trainer's weights arrived on every worker and serve
    want = trainer.state_dict()
    assert all(torch.equal(w.model.state_dict()[k], want[k]) for w in fake.workers for k in want)
    _, fresh = client.rollout(tok, PROMPTS, 2, 3, 1, ONE, **KW)
    assert torch.equal(fresh.completion_ids_BT, kit.rollout(trainer, tok, PROMPTS, 2, 3, 1, ONE, **KW)[1].completion_ids_BT)


def test_reset_prefix_cache_is_retried_then_a_named_error(world, tmp_path):
    fake, model, tok = world
    client = RolloutClient(fake.url, timeout=30, sync="vllm", token=API_KEY, model=fake.name)
    fake.reset_answers = [False, False]  # blocks still held twice: the client retries, as the route's doc says
    fake.requests.clear()
    client.sync_weights(model, tok, tmp_path / "w1", ONE)
    assert [r["path"] for r in fake.requests] == ["/collective_rpc"] + ["/reset_prefix_cache"] * 3
    fake.reset_answers = [False] * 10
    with pytest.raises(ShiftkitError, match="reset_prefix_cache kept answering success=false"):
        client.sync_weights(model, tok, tmp_path / "w2", ONE)


def test_vllm_sync_errors_are_one_line_and_named(world, tmp_path):
    fake, model, tok = world
    client = RolloutClient(fake.url, timeout=30, sync="vllm", token=API_KEY, model=fake.name)
    fake.dev_mode = False
    with pytest.raises(ShiftkitError, match="VLLM_SERVER_DEV_MODE=1") as e:
        client.sync_weights(model, tok, tmp_path / "w", ONE)
    assert "\n" not in str(e.value)
    fake.dev_mode = True
    empty = (tmp_path / "empty").resolve()
    empty.mkdir()
    with pytest.raises(ShiftkitError, match="HTTP 500") as e:  # the worker's reload raised: vLLM answers 500
        client.load_weights(empty)
    assert "\n" not in str(e.value)
    with pytest.raises(ShiftkitError, match="HTTP 401"):  # vLLM's --api-key guards /v1
        RolloutClient(fake.url, timeout=30, sync="vllm", token="").rollout(tok, PROMPTS, 1, 0, 0, ONE, **KW)


def test_rollout_sync_is_a_checked_trainer_key():
    from shiftkit.agent.rl import AgenticRLConfig
    from shiftkit.config import load_config
    from shiftkit.rl import GRPOConfig

    url = "rollout_url=http://127.0.0.1:1"
    for cls, base in ((GRPOConfig, ["model=m", "data=arith:add"]), (AgenticRLConfig, [])):
        with pytest.raises(ShiftkitError, match="rollout_sync.*'nccl' is not one of \\['sglang', 'vllm'\\]"):
            load_config(cls, overrides=[*base, url, "rollout_sync=nccl"])
        assert load_config(cls, overrides=[*base, url, "rollout_sync=vllm"]).rollout_sync == "vllm"
    with pytest.raises(ShiftkitError, match="rollout_sync='vllm' is only read with served rollouts"):
        load_config(GRPOConfig, overrides=["model=m", "data=arith:add", "rollout_sync=vllm"])
