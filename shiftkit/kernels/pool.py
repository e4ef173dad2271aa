"""One evaluation pool for the kernel environment: ``kernels eval-set``, ``kernels serve`` and the
kernel reward function all evaluate through it.

A request is a :class:`Job`: the problem's *source* (not a path), the solution's files, the mode
(``compile`` | ``verify`` | ``profile``) and the client's config overrides. :func:`run_job` writes both
into a private temporary directory and calls the environment's stable interface
(``evaluate`` / ``compile_only``), so the same job gives the same verdict in this process, in a pool
child or behind the HTTP service.

:class:`EvalPool` runs jobs on ``slots`` long-lived child processes (one evaluation each at a time),
fed from a bounded queue:

* a full queue refuses the job at once (:class:`PoolFull`);
* each job has a deadline counted from submission: a job still queued at its deadline is answered
  without running; a running one is killed with its whole process group and the slot's child is
  replaced;
* a child that dies mid-job (a crash the environment did not contain) answers that job with a one-line
  error and is replaced; the pool goes on.

Verdict cache (:class:`VerdictCache`): identical sources against the same problem under the same
configuration (:meth:`Job.key`) may reuse a verdict. ``compile`` and ``verify`` verdicts are reused;
``profile`` verdicts carry timings and are re-measured unless the pool was built with
``cache_timing=True``. With a ``path`` the verdicts are kept in a JSONL file across restarts, reused
only by the same harness (:func:`harness_fingerprint`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import pickle
import queue
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from shiftkit.errors import ShiftkitError
from shiftkit.kernels.evaluate import EvalConfig

MODES = ("compile", "verify", "profile")
# EvalConfig fields that belong to the operator of the environment, never to a request: they set the
# sandbox, the machine's resources and where artefacts live. A request naming one is refused.
SERVER_FIELDS = frozenset({"backend", "cache_dir", "allow_unisolated", "mem_limit_mb", "pids_max", "max_frame_mb",
                           "max_output_bytes", "timeout_s", "compile_timeout_s", "build_jobs", "threads", "pin_cpu",
                           "profile"})
CLIENT_FIELDS = frozenset(f.name for f in dataclasses.fields(EvalConfig)) - SERVER_FIELDS
SOURCE_SUFFIXES = (".cpp", ".cc", ".c", ".h", ".hpp", ".cu", ".cuh")
MAX_FILES = 32
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class PoolFull(Exception):
    """The pool's queue is full: retry later."""


class JobError(ValueError):
    """A request the environment cannot run (bad problem, bad files, bad config): the caller's fault."""


# ----------------------------------------------------------------------------- jobs

@dataclass(frozen=True)
class Job:
    problem_source: str
    problem_name: str
    files: tuple[tuple[str, str], ...]  # (relative path, text); ("solution.py", src) is a single-file solution
    mode: str = "verify"
    config: tuple[tuple[str, object], ...] = ()  # sorted (field, value) overrides of EvalConfig

    @property
    def layout(self) -> str:
        return "file" if len(self.files) == 1 and self.files[0][0].endswith(".py") and self.files[0][0] != "model_new.py" else "workspace"

    @property
    def solution_hash(self) -> str:
        h = hashlib.sha256()
        for rel, text in self.files:
            h.update(rel.encode() + b"\0" + text.encode() + b"\0")
        return h.hexdigest()[:16]

    def key(self) -> str:
        """The cache key: source, problem and configuration (and the mode)."""
        blob = json.dumps({"p": self.problem_source, "n": self.problem_name, "f": self.files, "m": self.mode,
                           "c": self.config}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()


def _check_rel(rel: str) -> str:
    if not isinstance(rel, str) or not rel.strip():
        raise JobError("solution file names must be non-empty strings")
    p = PurePosixPath(rel.strip())
    if p.is_absolute() or ".." in p.parts or rel.startswith("~") or "\\" in rel:
        raise JobError(f"solution file {rel!r} must be a relative path inside the workspace")
    ok = (len(p.parts) == 1 and p.suffix in (".py", *SOURCE_SUFFIXES)) or \
         (len(p.parts) == 2 and p.parts[0] == "kernels" and p.suffix in SOURCE_SUFFIXES)
    if not ok:
        raise JobError(f"solution file {rel!r} is not allowed: use model_new.py, <name>.py, <name>.cpp or "
                       f"kernels/<name>.(cpp|c|h|cu|...)")
    return str(p)


def make_job(problem_source: str, files: dict[str, str] | str, mode: str = "verify", config: dict | None = None,
             problem_name: str = "problem") -> Job:
    """Validate a request into a :class:`Job` (raises :class:`JobError` with a one-line reason).

    ``files`` is a single-file solution's source (a string) or ``{relative path: text}`` of a workspace
    (which must contain ``model_new.py``)."""
    if not isinstance(problem_source, str) or "class Model" not in problem_source:
        raise JobError("problem must be the source of a KernelBench-format problem (class Model, get_inputs, "
                       "get_init_inputs)")
    if not isinstance(problem_name, str) or not _NAME.match(problem_name):
        raise JobError(f"problem_name {problem_name!r} must be an identifier (letters, digits, _; <= 64 chars)")
    if mode not in MODES:
        raise JobError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    if isinstance(files, str):
        files = {"solution.py": files}
    if not isinstance(files, dict) or not files:
        raise JobError("the solution must be a source string or a non-empty {path: text} object")
    if len(files) > MAX_FILES:
        raise JobError(f"the solution has {len(files)} files; at most {MAX_FILES}")
    clean = {}
    for rel, text in files.items():
        if not isinstance(text, str):
            raise JobError(f"solution file {rel!r} must be text")
        clean[_check_rel(rel)] = text
    single = len(clean) == 1 and next(iter(clean)).endswith(".py") and next(iter(clean)) != "model_new.py"
    if not single and "model_new.py" not in clean:
        raise JobError("a workspace solution needs model_new.py (or send one .py file)")
    cfg = dict(config or {})
    if not isinstance(cfg, dict):
        raise JobError("config must be an object of EvalConfig fields")
    server = sorted(k for k in cfg if k in SERVER_FIELDS)
    if server:
        raise JobError(f"config field(s) {', '.join(server)} are set by the server, not by a request")
    unknown = sorted(k for k in cfg if k not in CLIENT_FIELDS)
    if unknown:
        raise JobError(f"unknown config field(s) {', '.join(unknown)}; known: {', '.join(sorted(CLIENT_FIELDS))}")
    try:
        EvalConfig(**cfg).validate()
    except (TypeError, ValueError, ShiftkitError) as e:
        raise JobError(f"bad config: {str(e).splitlines()[0]}") from None
    return Job(problem_source, problem_name, tuple(sorted(clean.items())), mode,
               tuple(sorted((k, cfg[k]) for k in cfg)))


def job_from_paths(problem: str | Path, solution: str | Path, mode: str = "profile", config: dict | None = None) -> Job:
    """A job from a problem file and a solution file or workspace directory (``eval-set``)."""
    pp, sp = Path(problem), Path(solution)
    if sp.is_dir():
        files = {str(f.relative_to(sp)): f.read_text() for f in sorted(sp.rglob("*"))
                 if f.is_file() and "build" not in f.relative_to(sp).parts
                 and (f.suffix in SOURCE_SUFFIXES or (f.suffix == ".py" and f.parent == sp))}
    else:
        files = {sp.name if sp.name != "model_new.py" else "solution.py": sp.read_text()}
    return make_job(pp.read_text(), files, mode, config, pp.stem if _NAME.match(pp.stem) else "problem")


def strip_result(d: dict) -> dict:
    """The result dict without bulky or run-local fields (build logs, raw times)."""
    d = dict(d)
    d.pop("builds", None)
    for t in d.get("timings", {}).values():
        t.pop("times_ms", None)
    return d


def run_job(job: Job, base: EvalConfig | None = None) -> dict:
    """Evaluate one job in this process: materialise problem and solution privately, run the
    environment, return the (stripped) result dict. A bad problem raises :class:`JobError`."""
    from shiftkit.kernels.evaluate import compile_only, evaluate
    from shiftkit.kernels.problem import load_problem
    from shiftkit.kernels.solution import load_solution

    base = base or EvalConfig()
    cfg = dataclasses.replace(base, **dict(job.config), profile=(job.mode == "profile"))
    d = Path(tempfile.mkdtemp(prefix="sk-job-"))
    try:
        pfile = d / f"{job.problem_name}.py"
        pfile.write_text(job.problem_source)
        try:
            problem = load_problem(pfile)
        except ShiftkitError as e:
            raise JobError(str(e).replace(str(d) + "/", "").splitlines()[0]) from None
        sdir = d / "solution"
        sdir.mkdir()
        for rel, text in job.files:
            (sdir / rel).parent.mkdir(parents=True, exist_ok=True)
            (sdir / rel).write_text(text)
        spath = sdir / job.files[0][0] if job.layout == "file" else sdir
        try:
            sol = load_solution(spath, cfg.backend)
        except ShiftkitError as e:
            raise JobError(str(e).replace(str(d) + "/", "").splitlines()[0]) from None
        res = compile_only(problem, sol, cfg) if job.mode == "compile" else evaluate(problem, sol, cfg)
        out = strip_result(res.to_dict())
    finally:
        shutil.rmtree(d, ignore_errors=True)
    out["solution"] = job.solution_hash
    out["mode"] = job.mode
    return out


# ----------------------------------------------------------------------------- the verdict cache

def harness_fingerprint() -> str:
    """A hash of what a verdict depends on besides the job: the kernel environment's own sources
    (``shiftkit/kernels/**/*.py`` and its C/C++ files) and :func:`verdict_context` (torch, the compiler, the
    machine). A verdict kept on disk is reused only by the same harness on the same stack."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        root = Path(__file__).resolve().parent
        h = hashlib.sha256(verdict_context().encode() + b"\0")
        for f in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".py", ".c", ".cc", ".cpp", ".h")):
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
        _FINGERPRINT = h.hexdigest()[:16]
    return _FINGERPRINT


def verdict_context() -> str:
    """The stack a verdict was measured on: torch's version (its eager and compiled baselines, its headers), the
    compiler, and the machine (CPU model and count: ``-march=native`` builds and every timing)."""
    import torch

    from shiftkit.kernels.backends import machine_id
    from shiftkit.kernels.build import _toolchain

    return f"torch={torch.__version__}|cc={_toolchain()[2]}|machine={machine_id()}"


_FINGERPRINT: str | None = None


class VerdictCache:
    """A bounded LRU of verdicts by :meth:`Job.key` (thread-safe).

    ``path``: a JSONL file that keeps the verdicts across restarts (one ``{"key", "harness", "result"}``
    line per verdict, appended and flushed as it is given). At start its lines are loaded; a line from
    another harness (:func:`harness_fingerprint`) is not reused, so an edited environment re-measures.
    A torn last line (a writer killed mid-line) is dropped with a note on stderr; any other bad line is
    an error that names the file and line."""

    def __init__(self, max_entries: int = 4096, cache_timing: bool = False, path: str | None = None):
        self.max_entries, self.cache_timing = max_entries, cache_timing
        self._d: OrderedDict[str, dict] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        self.loaded = self.other_harness = 0
        self.path = Path(path) if path else None
        self._f = None
        if self.path is not None:
            self._load()
            self._f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the cache's life

    def _load(self) -> None:
        if not self.path.is_file():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        torn = lines.pop()  # "" when the file ends with a newline
        if torn:
            print(f"shiftkit: {self.path}: dropped a torn last line ({len(torn)} bytes; a writer was killed mid-line)",
                  file=sys.stderr)
            with open(self.path, "r+b") as f:  # drop it, so the next append starts a fresh line
                f.truncate(len(raw) - len(torn))
        here = harness_fingerprint()
        for i, line in enumerate(lines, 1):
            try:
                e = json.loads(line)
                key, harness, result = e["key"], e["harness"], e["result"]
                if not (isinstance(key, str) and isinstance(result, dict)):
                    raise ValueError
            except (ValueError, KeyError, TypeError):
                raise ShiftkitError(f"verdict cache {self.path}:{i}: not a {{key, harness, result}} JSON line; "
                                    "fix or delete the file") from None
            if harness != here:
                self.other_harness += 1
                continue
            self._d[key] = result
            self._d.move_to_end(key)
            self.loaded += 1
        while len(self._d) > self.max_entries:
            self._d.popitem(last=False)

    def usable(self, job: Job) -> bool:
        return job.mode != "profile" or self.cache_timing

    def get(self, job: Job) -> dict | None:
        if not self.usable(job):
            return None
        key = job.key()
        with self._lock:
            v = self._d.get(key)
            if v is None:
                self.misses += 1
                return None
            self._d.move_to_end(key)
            self.hits += 1
            return json.loads(json.dumps(v)) | {"cached": True}

    def put(self, job: Job, result: dict) -> None:
        if not self.usable(job) or result.get("error"):
            return
        key, kept = job.key(), json.loads(json.dumps(result, default=str))
        with self._lock:
            self._d[key] = kept
            self._d.move_to_end(key)
            while len(self._d) > self.max_entries:
                self._d.popitem(last=False)
            if self._f is not None:
                self._f.write(json.dumps({"key": key, "harness": harness_fingerprint(), "result": kept}) + "\n")
                self._f.flush()

    def stats(self) -> dict:
        with self._lock:
            return {"entries": len(self._d), "hits": self.hits, "misses": self.misses, "path": str(self.path or ""),
                    "loaded": self.loaded, "other_harness": self.other_harness}


# ----------------------------------------------------------------------------- the pool

def _write_frame(f, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(struct.pack(">Q", len(data)) + data)
    f.flush()


def _read_frame(f):
    head = f.read(8)
    if len(head) < 8:
        raise EOFError
    (n,) = struct.unpack(">Q", head)
    data = f.read(n)
    if len(data) < n:
        raise EOFError
    return pickle.loads(data)  # noqa: S301 - frames between this process and its own child


def _child_main() -> None:
    """A pool child (``python -m shiftkit.kernels.pool``): a config frame, then one job frame at a time;
    answers ("ok", result) | ("job_error", msg) | ("harness_error", msg). Its stdout carries only frames
    (anything the evaluation prints goes to stderr)."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = os.fdopen(os.dup(0), "rb")
    import torch

    torch.set_num_threads(1)
    cfg = EvalConfig(**_read_frame(inp))
    while True:
        try:
            job = _read_frame(inp)
        except (EOFError, OSError):
            return
        if job is None:
            return
        try:
            _write_frame(out, ("ok", run_job(job, cfg)))
        except JobError as e:
            _write_frame(out, ("job_error", str(e)))
        except ShiftkitError as e:
            _write_frame(out, ("harness_error", str(e).splitlines()[0] if str(e) else "ShiftkitError"))
        except Exception as e:  # noqa: BLE001 - reported to the caller as one line
            _write_frame(out, ("harness_error", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))


@dataclass
class _Item:
    job: Job
    future: Future
    deadline: float  # monotonic


class _Slot:
    """One child process (its own session, so a deadline kills its whole tree)."""

    def __init__(self, base: dict):
        self.base = base
        self.proc: subprocess.Popen | None = None

    def ensure(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen([sys.executable, "-m", "shiftkit.kernels.pool"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, start_new_session=True, env=env)
        _write_frame(self.proc.stdin, self.base)

    def send(self, job: Job) -> None:
        _write_frame(self.proc.stdin, job)

    def wait(self, timeout: float) -> bool:
        r, _, _ = select.select([self.proc.stdout], [], [], None if math.isinf(timeout) else max(0.0, timeout))
        return bool(r)

    def recv(self):
        return _read_frame(self.proc.stdout)

    def kill(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            self.proc.kill()
            self.proc.wait(10)
        except Exception:  # noqa: BLE001
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except Exception:  # noqa: BLE001
                pass
        self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                _write_frame(self.proc.stdin, None)
                self.proc.wait(3)
            except Exception:  # noqa: BLE001
                pass
        self.kill()


class EvalPool:
    """``slots`` evaluation children fed from a bounded queue; ``submit`` returns a Future of the result
    dict (an ``"error"`` key and ``"status"`` 400/504/500 when the job could not be judged)."""

    def __init__(self, slots: int = 1, base: EvalConfig | None = None, queue_max: int = 64,
                 cache: VerdictCache | None = None, default_deadline_s: float = 900.0):
        if slots < 1:
            raise ShiftkitError(f"the evaluation pool needs slots >= 1, got {slots}")
        self.base = base or EvalConfig()
        self.base.validate()
        self.cache = cache if cache is not None else VerdictCache()
        self.default_deadline_s = default_deadline_s
        self._q: queue.Queue[_Item | None] = queue.Queue(maxsize=queue_max)
        self.slots = slots
        self._busy = 0
        self.max_busy = 0
        self.counts = {"done": 0, "crashed": 0, "deadline": 0, "refused": 0, "cached": 0}
        self._lock = threading.Lock()
        self._slots = [_Slot(dataclasses.asdict(self.base)) for _ in range(slots)]
        self._threads = [threading.Thread(target=self._loop, args=(s,), daemon=True, name=f"sk-eval-{i}")
                         for i, s in enumerate(self._slots)]
        self._closed = False
        for t in self._threads:
            t.start()

    # ---- submission
    def submit(self, job: Job, deadline_s: float | None = None) -> Future:
        """Queue ``job``; its deadline (``default_deadline_s`` when None; ``math.inf`` for none) counts from now."""
        fut: Future = Future()
        hit = self.cache.get(job)
        if hit is not None:
            with self._lock:
                self.counts["cached"] += 1
            fut.set_result(hit)
            return fut
        if self._closed:
            raise ShiftkitError("the evaluation pool is closed")
        item = _Item(job, fut, time.monotonic() + (deadline_s or self.default_deadline_s))
        try:
            self._q.put_nowait(item)
        except queue.Full:
            with self._lock:
                self.counts["refused"] += 1
            raise PoolFull(f"the evaluation queue is full ({self._q.maxsize} waiting); retry later") from None
        return fut

    def run(self, job: Job, deadline_s: float | None = None) -> dict:
        return self.submit(job, deadline_s).result()

    def stats(self) -> dict:
        with self._lock:
            return {"slots": self.slots, "busy": self._busy, "max_busy": self.max_busy, "queued": self._q.qsize(),
                    "queue_max": self._q.maxsize, **self.counts, "cache_hits": self.cache.hits,
                    "cache": self.cache.stats()}

    # ---- the slot loop
    def _loop(self, slot: _Slot) -> None:
        while True:
            item = self._q.get()
            if item is None:
                slot.close()
                return
            if item.future.cancelled():
                continue
            left = item.deadline - time.monotonic()
            if left <= 0:
                self._answer(item, {"error": "deadline exceeded while queued", "status": 504}, "deadline")
                continue
            with self._lock:
                self._busy += 1
                self.max_busy = max(self.max_busy, self._busy)
            try:
                self._answer(item, *self._run_on(slot, item, left))
            finally:
                with self._lock:
                    self._busy -= 1

    def _run_on(self, slot: _Slot, item: _Item, left: float) -> tuple[dict, str]:
        try:
            slot.ensure()
            slot.send(item.job)
        except Exception as e:  # noqa: BLE001 - a broken child: replace it
            slot.kill()
            return {"error": f"evaluation worker unavailable: {type(e).__name__}", "status": 500}, "crashed"
        try:
            ready = slot.wait(left)
        except (ValueError, OSError):
            ready = True
        if not ready:
            slot.kill()
            return {"error": f"deadline exceeded after {left:.0f} s: the evaluation was killed", "status": 504}, "deadline"
        try:
            kind, payload = slot.recv()
        except (EOFError, OSError, pickle.UnpicklingError):
            code = slot.proc.poll() if slot.proc is not None else None
            slot.kill()
            return {"error": f"the evaluation worker died (exit code {code}); it was replaced", "status": 500}, "crashed"
        if kind == "ok":
            self.cache.put(item.job, payload)
            return payload, "done"
        if kind == "job_error":
            return {"error": payload, "status": 400}, "done"
        return {"error": f"harness error: {payload}", "status": 500}, "done"

    def _answer(self, item: _Item, result: dict, count: str) -> None:
        with self._lock:
            self.counts[count] += 1
        if not item.future.done():
            item.future.set_result(result)

    # ---- eval-set
    def run_pairs(self, pairs: list[tuple[str, str]], config: EvalConfig, out_path: str | Path | None = None,
                  progress: bool = True, on_result: Callable[[dict], None] | None = None) -> list[dict]:
        """``kernels eval-set`` on this pool: one job per (problem file, solution), results in input order
        (written to ``out_path`` as JSONL as they finish), each with ``problem`` (stem) and ``solution`` (path).
        No pool deadline (the evaluation's own timeouts bound each job); the queue must hold every pair."""
        from tqdm import tqdm

        cfg = {k: v for k, v in dataclasses.asdict(config).items()
               if k in CLIENT_FIELDS and v != getattr(self.base, k)}
        mode = "profile" if config.profile else "verify"
        futs = []
        for p, s in pairs:
            try:
                futs.append((p, s, self.submit(job_from_paths(p, s, mode, cfg), math.inf)))
            except (JobError, OSError) as e:
                f: Future = Future()
                f.set_result({"error": str(e), "status": 400})
                futs.append((p, s, f))
        out = open(out_path, "w") if out_path else None  # noqa: SIM115
        results: list[dict | None] = [None] * len(futs)
        bar = tqdm(total=len(futs), disable=not progress, desc="kernels eval-set", unit="eval")
        try:
            pending = set(range(len(futs)))
            while pending:
                for i in sorted(pending):
                    p, s, f = futs[i]
                    if not f.done():
                        continue
                    pending.discard(i)
                    d = f.result()
                    if "error" in d:
                        d = {"problem": Path(p).stem, "compiled": False, "correct": False, "findings": [], "timings": {},
                             "speedup_eager": None, "speedup_compile": None, "reward": -1.0,
                             "reason": f"harness error: {d['error']}", "compile_errors": []}
                    d = dict(d, solution=s)
                    results[i] = d
                    if out:
                        out.write(json.dumps(d, default=str) + "\n")
                        out.flush()
                    if on_result:
                        on_result(d)
                    bar.update(1)
                time.sleep(0.05)
        finally:
            bar.close()
            if out:
                out.close()
        return [r for r in results if r is not None]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        while True:  # drop what is still queued
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                break
            if item is not None and not item.future.done():
                item.future.set_result({"error": "the evaluation pool was closed", "status": 503})
        for _ in self._threads:
            self._q.put(None)
        for t in self._threads:
            t.join(10)

    def __enter__(self) -> "EvalPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


if __name__ == "__main__":
    _child_main()
