"""Rollouts from a served model: an OpenAI-compatible completions endpoint that returns token ids
and log-probs (vLLM ``vllm serve``, SGLang, or ``shiftkit serve``), and weight sync by checkpoint reload.

    client = RolloutClient("http://127.0.0.1:8000/v1", sync="vllm")   # rollout_url=..., rollout_sync=...
    mine, roll = client.rollout(tok, prompts_P, G, seed, step, d, max_new_tokens=256, temperature=1.0)
    ...                                   # score, loss, optimizer step: the trainer's own
    client.sync_weights(model, tok, run_dir / "rollout_weights", d)
    row.update(logprob_gap(roll.logp_BT, trainer_logp_BT, roll.completion_mask_BT))

:meth:`RolloutClient.rollout` has the contract of :func:`shiftkit.loopkit.rollout` (rank sharding,
one seed per row from :func:`~shiftkit.loopkit.row_seed`, the :class:`~shiftkit.sampling.Rollouts`
layout); each row is one ``POST {url}/completions`` with the prompt as token ids, its ``seed``,
``logprobs: 0`` and ``return_token_ids: true`` (vLLM >= 0.10.2), sent ``concurrency`` at a time.
``logp_BT`` are the server's log-probs of the sampled tokens: on vLLM start the server with
``--logprobs-mode processed_logprobs`` so they are of the temperature-scaled distribution the trainer scores.

:meth:`RolloutClient.sync_weights` saves the trainer's weights atomically to a directory the server can
read and has the server load them, through a route the engine ships (``sync``, the trainer's
``rollout_sync`` key; :data:`SYNC_PROTOCOLS`):

* ``sglang``: SGLang's ``POST /update_weights_from_disk {"model_path": DIR}`` -> ``{"success": true}``
  (``shiftkit serve`` implements it too);
* ``vllm``: the stock vLLM server in dev mode (``VLLM_SERVER_DEV_MODE=1 vllm serve ...``):
  ``POST /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path": DIR}}`` ->
  ``{"results": [null, ...]}`` (one per worker; ``Worker.reload_weights`` -> ``GPUModelRunner.reload_weights``
  loads the checkpoint in place), then ``POST /reset_prefix_cache`` -> ``{"success": true}`` so no KV
  computed with the old weights is reused (vLLM 0.33.0: ``vllm/entrypoints/serve/dev/rpc/api_router.py``,
  ``vllm/entrypoints/serve/dev/cache/api_router.py``, ``vllm/v1/worker/gpu_model_runner.py``).

Either returns once the server answers that the new weights serve. Every request carries
``Authorization: Bearer $SHIFTKIT_SERVE_TOKEN`` when that is set (``shiftkit serve``'s token, or a vLLM
``--api-key``; note that vLLM checks its key only on ``/v1`` routes, so a dev-mode vLLM must never be
reachable from another machine).

:func:`logprob_gap` measures what every RL framework's users hit first: the rollout engine's
log-probs differ from the trainer's for the same tokens (kernels, precision, stale weights).
"""

from __future__ import annotations

import json
import os
import time
import typing
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from shiftkit.errors import ShiftkitError
from shiftkit.dist import unwrap
from shiftkit.loopkit import row_seed
from shiftkit.models import save_model
from shiftkit.sampling import Rollouts, pad_left
from shiftkit.serve import TOKEN_ENV

RolloutSync = typing.Literal["sglang", "vllm"]  # the type of the trainers' ``rollout_sync`` key
SYNC_PROTOCOLS: tuple[str, ...] = typing.get_args(RolloutSync)


def post_json(url: str, body: dict | None, timeout: float, headers: dict | None = None) -> dict:
    """``POST`` (or ``GET`` when ``body`` is None) ``url`` and decode the JSON answer.

    Raises :class:`ShiftkitError` with one line: unreachable, ``HTTP <code>: <detail>``, or not JSON."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        detail = " ".join(e.read().decode(errors="replace").split())[:300]
        raise ShiftkitError(f"{url}: HTTP {e.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as e:
        raise ShiftkitError(f"{url} unreachable: {getattr(e, 'reason', e)}") from None
    except json.JSONDecodeError:
        raise ShiftkitError(f"{url}: response is not JSON") from None


def api_base(url: str) -> str:
    """``http://host:port/v1`` from a URL with or without the ``/v1`` suffix."""
    base = url.rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


class RolloutClient:
    def __init__(self, url: str, timeout: float = 600.0, model: str | None = None, concurrency: int = 16,
                 sync: str = "sglang", token: str | None = None):
        if sync not in SYNC_PROTOCOLS:
            raise ShiftkitError(f"rollout_sync={sync!r} is not a weight-sync protocol; use one of "
                                f"{', '.join(SYNC_PROTOCOLS)} (sglang: POST /update_weights_from_disk; vllm: "
                                "POST /collective_rpc reload_weights on a VLLM_SERVER_DEV_MODE=1 server)")
        self.base = api_base(url)
        self.root = self.base[: -len("/v1")]
        self.timeout, self._model, self.concurrency, self.sync = timeout, model, max(1, concurrency), sync
        token = token if token is not None else os.environ.get(TOKEN_ENV, "")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def _post(self, url: str, body: dict | None) -> dict:
        return post_json(url, body, self.timeout, self.headers)

    def probe(self, timeout: float = 10.0) -> None:
        """Check, before a run writes anything, that the server answers ``GET /v1/models`` with a model:
        an unreachable URL or a server that is not OpenAI-compatible is a one-line error naming ``rollout_url``."""
        try:
            d = post_json(self.base + "/models", None, timeout, self.headers)
        except ShiftkitError as e:
            raise ShiftkitError(f"rollout_url={self.base}: {e}; start the completions server first (shiftkit serve "
                                "--model DIR --port P, SGLang or vLLM), or leave rollout_url empty to sample in "
                                "process") from None
        data = d.get("data") if isinstance(d, dict) else None
        if not data or not isinstance(data, list) or not isinstance(data[0], dict) or "id" not in data[0]:
            raise ShiftkitError(f"rollout_url={self.base}: GET /v1/models lists no model ({json.dumps(d)[:200]}); "
                                "is it an OpenAI-compatible completions server?")
        if self._model is None:
            self._model = str(data[0]["id"])

    @property
    def model(self) -> str:
        """The served model name (the first of ``GET /v1/models`` unless given)."""
        if self._model is None:
            d = self._post(self.base + "/models", None)
            try:
                self._model = str(d["data"][0]["id"])
            except (KeyError, IndexError, TypeError):
                raise ShiftkitError(f"{self.base}/models lists no model: {json.dumps(d)[:200]}") from None
        return self._model

    def _complete(self, prompt_ids: list[int], seed: int, max_new_tokens: int, temperature: float,
                  top_p: float) -> tuple[list[int], list[float], bool, str]:
        body = {"model": self.model, "prompt": list(prompt_ids), "n": 1, "max_tokens": max_new_tokens,
                "temperature": temperature, "top_p": top_p, "seed": int(seed), "logprobs": 0, "return_token_ids": True}
        d = self._post(self.base + "/completions", body)
        try:
            c = d["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise ShiftkitError(f"{self.base}/completions: no choices in the response: {json.dumps(d)[:200]}") from None
        ids = c.get("token_ids")
        if not isinstance(ids, list):
            raise ShiftkitError(f"{self.base}/completions returned no token ids: the server must honour "
                                "return_token_ids=true (vLLM >= 0.10.2, or shiftkit serve)")
        lps = (c.get("logprobs") or {}).get("token_logprobs")
        if not isinstance(lps, list) or len(lps) != len(ids) or any(x is None for x in lps):
            raise ShiftkitError(f"{self.base}/completions returned no per-token log-probs for the {len(ids)} tokens: "
                                "the server must honour logprobs=0 (vLLM: --max-logprobs >= 0)")
        return [int(t) for t in ids], [float(x) for x in lps], c.get("finish_reason") == "stop", c.get("text") or ""

    def sample(self, tok, prompt_ids: list[list[int]], *, max_new_tokens: int, temperature: float, top_p: float = 1.0,
               greedy: bool = False, row_seeds: list[int] | None = None, device="cpu") -> Rollouts:
        """:func:`shiftkit.sampling.sample` on token-id prompts, served: one request per row with its seed
        (``greedy`` = temperature 0). The same :class:`Rollouts` layout; ``logp_BT`` is the server's."""
        seeds = row_seeds if row_seeds is not None else list(range(len(prompt_ids)))
        temp = 0.0 if greedy else temperature
        with ThreadPoolExecutor(self.concurrency) as ex:
            outs = list(ex.map(lambda a: self._complete(a[0], a[1], max_new_tokens, temp, top_p), zip(prompt_ids, seeds)))
        T = max(1, max(len(o[0]) for o in outs))
        B = len(outs)
        comp_BT = torch.full((B, T), tok.pad_token_id, dtype=torch.long)
        cmask_BT = torch.zeros((B, T), dtype=torch.long)
        logp_BT = torch.zeros((B, T), dtype=torch.float32)
        for b, (ids, lps, _, _) in enumerate(outs):
            comp_BT[b, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            cmask_BT[b, : len(ids)] = 1
            logp_BT[b, : len(ids)] = torch.tensor(lps, dtype=torch.float32)
        ids_BP, mask_BP = pad_left([list(p) for p in prompt_ids], tok.pad_token_id)
        eos_B = torch.tensor([o[2] for o in outs], dtype=torch.bool)
        return Rollouts(ids_BP.to(device), mask_BP.to(device), comp_BT.to(device), cmask_BT.to(device),
                        logp_BT.to(device), eos_B.to(device), [o[3] for o in outs])

    def rollout(self, tok, prompts_P: list, group_size: int, seed: int, step: int, d, *, max_new_tokens: int,
                temperature: float, top_p: float = 1.0, rows: int = 0) -> tuple[list[int], Rollouts]:
        """:func:`shiftkit.loopkit.rollout` with the samples drawn by the server (same sharding, seeds, layout).
        ``rows`` is accepted for the same call signature and unused: the server batches the requests."""

        mine = d.shard(list(range(len(prompts_P))))
        enc = lambda p: tok(p, add_special_tokens=False)["input_ids"] if isinstance(p, str) else list(p)  # noqa: E731
        prompts = [enc(prompts_P[i]) for i in mine for _ in range(group_size)]
        seeds = [row_seed(seed, step, i, j) for i in mine for j in range(group_size)]
        return mine, self.sample(tok, prompts, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                                 row_seeds=seeds, device=d.device)

    def sync_weights(self, model, tok, path, d=None) -> None:
        """Save ``model`` (unwrapped from DDP; a LoRA/PEFT policy as a merged copy, so the server loads a
        plain model) and ``tok`` atomically to ``path`` and have the server load it through the ``sync``
        route; returns once the server serves them. Under DDP only the main rank saves and posts, the
        others wait at a barrier."""
        import copy


        if d is None or d.is_main:
            path = Path(path).resolve()
            m = unwrap(model)
            if hasattr(m, "peft_config") and hasattr(m, "merge_and_unload"):  # the training copy keeps its adapters
                m = copy.deepcopy(m).merge_and_unload()
            save_model(m, tok, path)
            self.load_weights(path)
        if d is not None:
            d.barrier()

    def load_weights(self, path: Path) -> None:
        """Have the server load the ``save_pretrained`` directory ``path`` (absolute, readable by the server)."""
        if self.sync == "sglang":
            r = self._post(self.root + "/update_weights_from_disk", {"model_path": str(path)})
            if r.get("success") is not True:
                raise ShiftkitError(f"{self.root}/update_weights_from_disk did not load {path}: {r.get('message', r)}")
            return
        try:  # vLLM dev mode: reload in place on every worker, then drop KV cached with the old weights
            r = self._post(self.root + "/collective_rpc", {"method": "reload_weights",
                                                          "kwargs": {"weights_path": str(path)}})
        except ShiftkitError as e:
            hint = (" (is the server vLLM started with VLLM_SERVER_DEV_MODE=1? rollout_sync=vllm needs its "
                    "/collective_rpc route)") if "HTTP 404" in str(e) else ""
            raise ShiftkitError(f"rollout_sync=vllm: {e}{hint}") from None
        results = r.get("results")
        if not isinstance(results, list) or not results or any(x is not None for x in results):
            raise ShiftkitError(f"{self.root}/collective_rpc reload_weights did not load {path}: {json.dumps(r)[:200]}")
        for attempt in range(5):  # vLLM: success=false while cache blocks are still held; callers may retry
            if self._post(self.root + "/reset_prefix_cache", {}).get("success") is True:
                return
            time.sleep(0.2 * (attempt + 1))
        raise ShiftkitError(f"{self.root}/reset_prefix_cache kept answering success=false after the reload of {path}; "
                            "requests still running on the server would reuse KV computed with the old weights")


def served_rollouts(url: str, sync: str) -> RolloutClient | None:
    """The trainers' ``rollout_url`` / ``rollout_sync``: None for in-process sampling (``url`` ""), else a
    client whose server has answered :meth:`RolloutClient.probe` (call it before anything is written)."""
    if not url:
        return None
    client = RolloutClient(url, sync=sync)
    client.probe()
    return client


def logprob_gap(rollout_logp_BT: torch.Tensor, trainer_logp_BT: torch.Tensor, mask_BT: torch.Tensor) -> dict[str, float]:
    """The rollout-versus-trainer log-prob gap over valid tokens: ``mean_abs``, ``max_abs`` and
    ``mean_signed`` (rollout - trainer). All 0 when no token is valid."""
    m = mask_BT.bool()
    if not bool(m.any()):
        return {"mean_abs": 0.0, "max_abs": 0.0, "mean_signed": 0.0}
    diff = (rollout_logp_BT.detach().float() - trainer_logp_BT.detach().float().to(rollout_logp_BT.device))[m.to(rollout_logp_BT.device)]
    return {"mean_abs": float(diff.abs().mean()), "max_abs": float(diff.abs().max()), "mean_signed": float(diff.mean())}
