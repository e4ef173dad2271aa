"""``shiftkit serve``: an OpenAI-compatible completions server for rollouts (stdlib ``http.server``, loopback only).

    shiftkit serve --model runs/rl/final --port 8000
    curl -s 127.0.0.1:8000/v1/completions -d '{"prompt": [5, 6, 7], "max_tokens": 8, "seed": 3,
                                               "logprobs": 0, "return_token_ids": true}'

Routes (the same request and response shapes as vLLM's ``vllm serve`` and SGLang, so
:class:`shiftkit.remote.RolloutClient` talks to either):

* ``POST /v1/completions``: ``prompt`` is a string, token ids, or a list of either; ``n``, ``max_tokens``
  (default 16), ``temperature`` (default 1.0; 0 = greedy), ``top_p``, ``seed``, ``logprobs`` (any
  value: the sampled tokens' log-probs; ``top_logprobs`` is not computed and comes back null) and
  ``return_token_ids`` (vLLM's field: each choice gets ``token_ids`` and ``prompt_token_ids``).
  Sampling is :func:`shiftkit.sampling.sample` with row seeds ``seed + j`` for sample ``j`` of a prompt,
  so a request with seed ``s`` gives the tokens of a local ``sample(..., row_seeds=[s])``; the log-probs
  are of the sampling distribution (temperature and top-p applied; vLLM's ``--logprobs-mode
  processed_logprobs``). ``finish_reason`` is ``stop`` at EOS, ``length`` at ``max_tokens``.
* ``POST /update_weights_from_disk`` ``{"model_path": DIR}``: SGLang's reload route. Loads the weights
  of a ``save_pretrained`` directory with the same architecture, swaps them in under the request lock
  and answers when the new weights serve (``{"success": true, ..., "weight_version": N}``); a missing
  directory or another architecture answers 400 and keeps the old weights.
* ``GET /v1/models``, ``GET /health`` (``{"status": "ok", "weights": DIR, "weight_version": N}``).

Requests are served one at a time (one model, one lock). It exists so the remote-rollout path is
tested against a real server in a separate process and so tiny policies can be served; at scale
use vLLM or SGLang.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from shiftkit.errors import ShiftkitError

Route = Callable[[dict], tuple[int, dict]]


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # listen backlog: a rollout client opens many connections at once (the default 5 resets them)
    daemon_threads = True


class JSONServer:
    """A loopback JSON-over-HTTP server: ``routes[(method, path)](body) -> (status, response)``.

    Subclasses fill ``self.routes``; an unknown route is 404, a body that is not a JSON object is 400,
    a handler's ``ValueError``/``KeyError``/``TypeError`` is 400 with its message."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, name: str = "json-server"):
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ShiftkitError(f"serve binds to loopback only, not {host!r}")
        self.routes: dict[tuple[str, str], Route] = {}
        self.lock = threading.Lock()
        self._name = name
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def _send(self, code: int, obj: dict) -> None:
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _dispatch(self, method: str) -> None:
                route = server.routes.get((method, self.path.split("?")[0].rstrip("/")))
                if route is None:
                    return self._send(404, {"error": {"message": f"no route {method} {self.path}"}})
                try:
                    raw = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0)) if method == "POST" else b""
                    body = json.loads(raw or b"{}")
                    if not isinstance(body, dict):
                        raise ValueError("the body must be a JSON object")
                    code, obj = route(body)
                except (ValueError, KeyError, TypeError) as e:  # json.JSONDecodeError is a ValueError
                    code, obj = 400, {"error": {"message": f"bad request: {e}"}}
                self._send(code, obj)

            def do_GET(self):
                self._dispatch("GET")

            def do_POST(self):
                self._dispatch("POST")

        self.httpd = _Server((host, port), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://{host}:{self.port}/v1"
        self._thread: threading.Thread | None = None

    def start(self):
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name=self._name)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def serve_forever(self, banner: str) -> None:
        print(banner, flush=True)
        try:
            self.httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            self.httpd.server_close()


def _as_prompts(prompt) -> list:
    """The request's ``prompt`` as a list of prompts (each a string or a list of token ids)."""
    if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)):
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) or (isinstance(p, list) and p and all(
            isinstance(t, int) for t in p)) for p in prompt):
        return prompt
    raise ValueError("prompt must be a string, a non-empty list of token ids, or a list of those")


class CompletionServer(JSONServer):
    def __init__(self, model, tokenizer, name: str = "local", host: str = "127.0.0.1", port: int = 0,
                 weights: str = ""):
        super().__init__(host, port, "completion-server")
        self.model, self.tok, self.name = model, tokenizer, name
        self.weights, self.weight_version = weights, 0
        self.routes = {("GET", "/health"): self.health, ("GET", "/v1/models"): self.models,
                       ("POST", "/v1/completions"): self.completions,
                       ("POST", "/update_weights_from_disk"): self.update_weights_from_disk}

    def health(self, _body: dict) -> tuple[int, dict]:
        return 200, {"status": "ok", "model": self.name, "weights": self.weights, "weight_version": self.weight_version}

    def models(self, _body: dict) -> tuple[int, dict]:
        return 200, {"object": "list", "data": [{"id": self.name, "object": "model", "owned_by": "shiftkit"}]}

    def completions(self, req: dict) -> tuple[int, dict]:
        from shiftkit.sampling import sample

        if req.get("stream") or req.get("echo") or req.get("stop") or req.get("suffix"):
            raise ValueError("stream, echo, stop and suffix are not supported by shiftkit serve")
        prompts = [p if isinstance(p, list) else self.tok(p, add_special_tokens=False)["input_ids"]
                   for p in _as_prompts(req.get("prompt"))]
        if not all(prompts):
            raise ValueError("a prompt is empty")
        n = int(req.get("n") or 1)
        max_tokens = int(req.get("max_tokens") if req.get("max_tokens") is not None else 16)
        temperature = float(req.get("temperature") if req.get("temperature") is not None else 1.0)
        top_p = float(req.get("top_p") if req.get("top_p") is not None else 1.0)
        if n < 1 or max_tokens < 1 or temperature < 0 or not 0 < top_p <= 1:
            raise ValueError("need n >= 1, max_tokens >= 1, temperature >= 0 and 0 < top_p <= 1")
        seed = int(req["seed"]) if req.get("seed") is not None else uuid.uuid4().int % 2**62
        rows = [p for p in prompts for _ in range(n)]
        with self.lock:
            roll = sample(self.model, self.tok, prompt_ids=rows, max_new_tokens=max_tokens, temperature=max(temperature, 1e-6),
                          top_p=top_p, greedy=temperature == 0, row_seeds=[seed + j for _ in prompts for j in range(n)])
        choices = []
        for b, ids_p in enumerate(rows):
            keep = roll.completion_mask_BT[b].bool()
            ids = roll.completion_ids_BT[b][keep].tolist()
            c = {"index": b, "text": roll.texts[b], "logprobs": None,
                 "finish_reason": "stop" if bool(roll.eos_B[b]) else "length", "stop_reason": None}
            if req.get("logprobs") is not None:
                c["logprobs"] = {"tokens": [self.tok.decode([t]) for t in ids],
                                 "token_logprobs": roll.logp_BT[b][keep].tolist(), "top_logprobs": None,
                                 "text_offset": None}
            if req.get("return_token_ids"):
                c.update(token_ids=ids, prompt_token_ids=list(ids_p))
            choices.append(c)
        n_p = sum(len(p) for p in rows)
        n_c = int(roll.completion_mask_BT.sum())
        return 200, {"id": "cmpl-" + uuid.uuid4().hex[:12], "object": "text_completion", "created": int(time.time()),
                     "model": self.name, "choices": choices,
                     "usage": {"prompt_tokens": n_p, "completion_tokens": n_c, "total_tokens": n_p + n_c}}

    def update_weights_from_disk(self, req: dict) -> tuple[int, dict]:
        from shiftkit.models import load_model

        path = req.get("model_path")
        if not isinstance(path, str) or not path:
            raise ValueError("update_weights_from_disk needs model_path=<save_pretrained directory>")
        if not (Path(path) / "config.json").is_file():
            return 400, {"success": False, "message": f"model_path {path} is not a model directory (no config.json)"}
        try:
            new = load_model(path, dtype=next(self.model.parameters()).dtype, device=next(self.model.parameters()).device)
        except ShiftkitError as e:
            return 400, {"success": False, "message": str(e)}
        old_sd, new_sd = self.model.state_dict(), new.state_dict()
        shapes = lambda sd: {k: tuple(v.shape) for k, v in sd.items()}  # noqa: E731
        if type(new) is not type(self.model) or shapes(old_sd) != shapes(new_sd):
            return 400, {"success": False, "message": f"model_path {path} has another architecture than the served model"}
        new.eval()
        with self.lock:  # in-flight requests finish on the old weights; later ones see the new
            self.model = new
            self.weights, self.weight_version = path, self.weight_version + 1
        return 200, {"success": True, "message": "Succeeded to update model weights.", "weight_version": self.weight_version}


@dataclasses.dataclass
class ServeConfig:
    model: str = ""  # HF model directory (save_pretrained) or cached hub id to serve
    host: str = "127.0.0.1"  # loopback only
    port: int = 8000  # TCP port (0 = any free port; the banner says which)
    name: str = ""  # the served model name ("" = the model path)
    threads: int = 1  # torch threads (0 = torch's default)

    def validate(self) -> None:
        if not self.model:
            raise ShiftkitError("serve needs model=<HF model dir> (or --model DIR)")


def serve(cfg: ServeConfig) -> None:
    from shiftkit.dist import set_threads
    from shiftkit.models import load_model_and_tokenizer

    set_threads(cfg.threads)
    model, tok = load_model_and_tokenizer(cfg.model)
    model.eval()
    s = CompletionServer(model, tok, name=cfg.name or cfg.model, host=cfg.host, port=cfg.port, weights=cfg.model)
    s.serve_forever(f"serving {cfg.model} at {s.url} (completions; Ctrl-C to stop)")
