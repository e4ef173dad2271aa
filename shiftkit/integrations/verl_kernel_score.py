"""verl's custom reward function for the kernel environment (``shiftkit kernels serve``), written and tested
against verl 0.9.1. Standard library only and no shiftkit import, so verl's workers need only this file.

verl loads it by path (``verl.trainer.ppo.reward.get_custom_reward_fn``: the config keys are under
``reward.``, and ``reward_kwargs`` are merged into every call)::

    reward.custom_reward_function.path=$(python -c "import shiftkit.integrations.verl_kernel_score as m; print(m.__file__)")
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.url=http://HOST:8000

and its reward managers call ``compute_score(data_source=, solution_str=, ground_truth=, extra_info=)``
(``NaiveRewardManager.__call__``). The problem comes from the row's ``extra_info``: ``problem`` (the
KernelBench source) and/or ``problem_name`` (a name the server serves with ``problems=DIR``) — the columns
``shiftkit kernels dataset`` writes. The policy's decoded response is sent as ``completion`` (the server
extracts the fenced solution; an answer without one is -1, ``no_solution``).

Returned: a dict, which verl's managers read as ``score`` plus per-sample extra columns: ``score`` (the
environment's milestone reward), ``kernel_correct`` (0/1) and ``kernel_compiled`` (0/1).

verl has no "unscorable" sample: a full queue (503) is retried ``retries`` times with backoff, and any other
failure (a deadline, 504; a bad request, 4xx; an unreachable server) raises with the server's one-line
detail, so a training step never records an environment failure as the policy's reward.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

MODES = ("profile", "verify", "compile")


def step_body(solution_str: str, extra_info: dict | None, mode: str, config: dict | None) -> dict:
    """The ``POST /step`` body for one response (pure; raises on a row without a problem)."""
    info = extra_info or {}
    if not info.get("problem") and not info.get("problem_name"):
        raise ValueError("kernel reward: the row's extra_info has neither 'problem' (the KernelBench source) nor "
                         "'problem_name'; build the dataset with `shiftkit kernels dataset`")
    if mode not in MODES:
        raise ValueError(f"kernel reward: mode={mode!r}; use one of {', '.join(MODES)}")
    action = {"completion": solution_str, "mode": mode}
    action.update({k: info[k] for k in ("problem", "problem_name") if info.get(k)})
    if config:
        action["config"] = dict(config)
    return {"action": action}


def compute_score(data_source, solution_str, ground_truth, extra_info=None, *, url: str = "", token: str = "",
                  mode: str = "profile", config: dict | None = None, timeout: float = 960.0, retries: int = 3,
                  **_ignored) -> dict:
    """verl's ``compute_score`` signature; ``url`` (and ``token``, ``mode``, ``config``, ``timeout``,
    ``retries``) come from ``reward_kwargs``. ``data_source`` and ``ground_truth`` are not read: the
    environment judges against the problem's reference, not a stored answer."""
    if not url:
        raise ValueError("kernel reward: no url; set +reward.custom_reward_function.reward_kwargs.url=http://HOST:PORT")
    data = json.dumps(step_body(solution_str, extra_info, mode, config)).encode()
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    for attempt in range(retries + 1):
        req = urllib.request.Request(url.rstrip("/") + "/step", data, headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                out = json.load(r)
            break
        except urllib.error.HTTPError as e:
            detail = _detail(e)
            if e.code == 503 and attempt < retries:
                time.sleep(min(30.0, 2.0 ** attempt))
                continue
            raise RuntimeError(f"kernel reward: {url}/step answered {e.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as e:
            raise RuntimeError(f"kernel reward: {url}/step unreachable ({e}); is `shiftkit kernels serve` running "
                               "there?") from None
    reward = out.get("reward")
    if reward is None:
        raise RuntimeError(f"kernel reward: {url}/step gave no reward (mode={mode!r}: compile has none; use verify "
                           "or profile)")
    res = (out.get("observation") or {}).get("result") or {}
    return {"score": float(reward), "kernel_correct": float(bool(res.get("correct"))),
            "kernel_compiled": float(bool(res.get("compiled")))}


def _detail(e: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(e.read()).get("detail", ""))[:300]
    except Exception:  # noqa: BLE001 - a body that is not the server's JSON
        return e.reason if isinstance(e.reason, str) else ""
