"""The kernel environment behind one interface, in process or over HTTP (``kernel_env_url=``).

    env = make_env("")                              # in process (this process, or a local pool)
    env = make_env("http://127.0.0.1:8000", token)  # a ``shiftkit kernels serve`` service
    d = env.evaluate(problem_source, solution_source_or_files, "verify", {"trials": 3}, "my_problem")

Both validate the request with :func:`shiftkit.kernels.pool.make_job` and judge it with
:func:`shiftkit.kernels.pool.run_job`; the remote one sends the job over the service's OpenEnv
contract (``POST /step``) and reads ``observation.result``. So a request gives the same verdict either
way (the service's timings are its own machine's).

A result is the environment's ``Result.to_dict()`` (without build logs and raw times) plus ``solution``
(the files' hash), ``mode`` and, when a verdict was reused, ``cached``. A request that could not be
judged is ``{"error": one line, "status": HTTP-like code}``: 400 the request is wrong (a bad problem or
file name: the caller's bug), 503 the service is full, 504 the deadline passed, 500 the harness failed.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from shiftkit.errors import ShiftkitError
from shiftkit.kernels.evaluate import EvalConfig
from shiftkit.kernels.pool import EvalPool, JobError, VerdictCache, make_job, run_job


class KernelEnv:
    """Interface: ``evaluate`` one request, ``evaluate_many`` a batch (results in request order)."""

    def evaluate(self, problem: str, solution, mode: str = "verify", config: dict | None = None,
                 problem_name: str = "problem") -> dict:
        raise NotImplementedError

    def evaluate_many(self, requests: list[tuple]) -> list[dict]:
        return [self.evaluate(*r) for r in requests]

    def close(self) -> None:
        pass


class LocalKernelEnv(KernelEnv):
    """The environment in this process (``slots=0``) or on a local :class:`EvalPool` of ``slots`` children."""

    def __init__(self, base: EvalConfig | None = None, slots: int = 0, cache: VerdictCache | None = None,
                 deadline_s: float = 900.0):
        self.base = base or EvalConfig()
        self.cache = cache if cache is not None else VerdictCache()
        self.deadline_s = deadline_s
        self.pool = EvalPool(slots, self.base, cache=self.cache, default_deadline_s=deadline_s) if slots > 0 else None

    def _job(self, problem, solution, mode, config, problem_name):
        try:
            return make_job(problem, solution, mode, config, problem_name), None
        except JobError as e:
            return None, {"error": str(e), "status": 400}

    def evaluate(self, problem, solution, mode="verify", config=None, problem_name="problem") -> dict:
        job, err = self._job(problem, solution, mode, config, problem_name)
        if err:
            return err
        if self.pool is not None:
            return self.pool.run(job, self.deadline_s)
        hit = self.cache.get(job)
        if hit is not None:
            return hit
        try:
            d = run_job(job, self.base)
        except JobError as e:
            return {"error": str(e), "status": 400}
        self.cache.put(job, d)
        return d

    def evaluate_many(self, requests: list[tuple]) -> list[dict]:
        if self.pool is None:
            return super().evaluate_many(requests)
        futs = []
        for r in requests:
            job, err = self._job(*r)
            futs.append(err if err else self.pool.submit(job, self.deadline_s))
        return [f if isinstance(f, dict) else f.result() for f in futs]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


class RemoteKernelEnv(KernelEnv):
    """A ``shiftkit kernels serve`` service over its OpenEnv HTTP route ``POST /step`` (stdlib only)."""

    def __init__(self, url: str, token: str = "", timeout_s: float = 900.0, parallel: int = 4):
        self.url = url.rstrip("/")
        if self.url.endswith("/step"):
            self.url = self.url[: -len("/step")]
        if not self.url.startswith(("http://", "https://")):
            raise ShiftkitError(f"kernel_env_url must be http(s)://HOST:PORT, got {url!r}")
        self.token, self.timeout_s, self.parallel = token, timeout_s, max(1, parallel)

    def _post(self, path: str, body: dict) -> tuple[int, dict]:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s + 30) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            try:
                return e.code, json.loads(e.read() or b"{}")
            except json.JSONDecodeError:
                return e.code, {"detail": f"HTTP {e.code}"}
        except (urllib.error.URLError, OSError) as e:
            raise ShiftkitError(f"kernel environment at {self.url} is unreachable: {getattr(e, 'reason', e)}; "
                                "start it with `shiftkit kernels serve` or unset kernel_env_url") from None

    def evaluate(self, problem, solution, mode="verify", config=None, problem_name="problem") -> dict:
        action = {"problem": problem, "problem_name": problem_name, "mode": mode, "config": dict(config or {})}
        action["files" if isinstance(solution, dict) else "solution"] = solution
        code, body = self._post("/step", {"action": action, "timeout_s": self.timeout_s})
        if code == 401:
            raise ShiftkitError(f"kernel environment at {self.url} refused the token: {body.get('detail', '')}")
        if code != 200:
            return {"error": str(body.get("detail", f"HTTP {code}")), "status": code}
        return body["observation"]["result"]

    def evaluate_many(self, requests: list[tuple]) -> list[dict]:
        with ThreadPoolExecutor(max_workers=min(self.parallel, max(1, len(requests)))) as ex:
            return list(ex.map(lambda r: self.evaluate(*r), requests))


def make_env(url: str = "", token: str = "", base: EvalConfig | None = None, slots: int = 0) -> KernelEnv:
    """``kernel_env_url``: "" = in process (``slots`` > 0: a local pool), else a served environment."""
    if url:
        return RemoteKernelEnv(url, token)
    return LocalKernelEnv(base, slots)


_DEFAULT: list[KernelEnv] = []


def default_env() -> KernelEnv:
    """A process-wide in-process environment (for reward functions called without ``env``)."""
    if not _DEFAULT:
        _DEFAULT.append(LocalKernelEnv())
    return _DEFAULT[0]
