"""Multi-digit arithmetic with step-by-step traces and an exact checker.

Domains (each a :class:`ArithTask`):

* ``add``: ``347+285=`` -> ``7+5=12,4+8+1=13,3+2+1=6:632``
* ``sub``: ``532-285=`` -> ``12-5=7,13-8-1=4,5-2-1=2:247`` (a column written ``1x-y`` borrowed)
* ``mul``: ``347*8=`` -> ``7*8=56,4*8+5=37,3*8+3=27:2776``

Columns go right to left; each writes its operands, the incoming carry/borrow, and the result; the
final answer follows ``:``. The reward is exact match of the final answer (1.0 or 0.0).

**Designed room for RL.** Supervised traces contain a *systematic* mistake at a realistic rate:
in the last (leftmost) column, the incoming carry (add, mul) or borrow (sub) is dropped with
probability ``error_rate`` (default 0.6 in the toy world), and the answer is computed from the
faulty trace. Because the rate is above 1/2 in exactly those problems, a model that imitates the
data decodes the mistake greedily, yet samples the correct column often enough (~40%) that a
verifiable reward can find and reinforce it.

**Splits.** A problem belongs to the test split iff a stable hash of its prompt falls in the test
bucket (1 in 8), so train and test never overlap, whatever the seed.
"""

from __future__ import annotations

import hashlib
import random
import re

from shiftkit.errors import ShiftkitError
from shiftkit.tasks.base import Problem

TEST_BUCKETS = 8  # 1/8 of all problems are test problems


def split_of(prompt: str) -> str:
    h = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:4], "little")
    return "test" if h % TEST_BUCKETS == 0 else "train"


def _digits(x: int, width: int) -> list[int]:
    """Little-endian digits of x padded to width."""
    return [(x // 10**i) % 10 for i in range(width)]


def _rand_ndigit(rng: random.Random, n: int) -> int:
    return rng.randint(10 ** (n - 1) if n > 1 else 0, 10**n - 1)


_ANSWER_RE = re.compile(r":\s*(-?\d+)\s*$")


def extract_final_answer(completion: str) -> str | None:
    """The number after the last ``:`` (the trace's final answer), or None if malformed."""
    m = _ANSWER_RE.search(completion.strip())
    return m.group(1).lstrip("0") or "0" if m else None


class ArithTask:
    """One arithmetic domain: generator (seed, difficulty), trace writer, exact checker."""

    def __init__(self, op: str, difficulties: tuple[int, ...]):
        if op not in ("add", "sub", "mul"):
            raise ShiftkitError(f"unknown arithmetic domain '{op}' (use add, sub or mul)")
        self.name = op
        self.op = op
        self.difficulties = tuple(difficulties)

    # ---- generation ---------------------------------------------------------------------------
    def _make(self, a: int, b: int, difficulty: int) -> Problem:
        sym = {"add": "+", "sub": "-", "mul": "*"}[self.op]
        ans = {"add": a + b, "sub": a - b, "mul": a * b}[self.op]
        return Problem(self.op, f"{a}{sym}{b}=", str(ans), difficulty, (a, b))

    def _draw(self, rng: random.Random, d: int) -> Problem:
        if self.op == "mul":
            a, b = _rand_ndigit(rng, d), rng.randint(2, 9)
        else:
            a, b = _rand_ndigit(rng, d), _rand_ndigit(rng, d)
            if self.op == "sub" and b > a:
                a, b = b, a
        return self._make(a, b, d)

    def sample(self, rng: random.Random, split: str = "train", difficulty: int | None = None) -> Problem:
        d = difficulty if difficulty is not None else rng.choice(self.difficulties)
        for _ in range(1000):
            p = self._draw(rng, d)
            if split_of(p.prompt) == split:
                return p
        raise ShiftkitError(f"could not draw a {split} problem for {self.op} at difficulty {d}")

    # ---- traces -------------------------------------------------------------------------------
    def trace(self, problem: Problem, rng: random.Random | None = None, error_rate: float = 0.0) -> str:
        """A step-by-step completion; with prob. ``error_rate`` the last column drops its carry."""
        a, b = problem.meta
        drop = rng is not None and error_rate > 0 and rng.random() < error_rate
        return {"add": self._trace_add, "sub": self._trace_sub, "mul": self._trace_mul}[self.op](a, b, drop)

    def trace_would_err(self, problem: Problem) -> bool:
        """Whether a dropped last-column carry would change the answer for this problem."""
        a, b = problem.meta
        fn = {"add": self._trace_add, "sub": self._trace_sub, "mul": self._trace_mul}[self.op]
        return extract_final_answer(fn(a, b, True)) != extract_final_answer(fn(a, b, False))

    @staticmethod
    def _trace_add(a: int, b: int, drop_last: bool) -> str:
        w = max(len(str(a)), len(str(b)))
        da, db = _digits(a, w), _digits(b, w)
        cols, out, c = [], [], 0
        for i in range(w):
            if i == w - 1 and drop_last:
                c = 0
            s = da[i] + db[i] + c
            cols.append(f"{da[i]}+{db[i]}" + (f"+{c}" if c else "") + f"={s}")
            out.append(s % 10)
            c = s // 10
        digits = ([c] if c else []) + out[::-1]
        return ",".join(cols) + ":" + (str(int("".join(map(str, digits)))))

    @staticmethod
    def _trace_sub(a: int, b: int, drop_last: bool) -> str:
        w = len(str(a))
        da, db = _digits(a, w), _digits(b, w)
        cols, out, br = [], [], 0
        for i in range(w):
            if i == w - 1 and drop_last:
                br = 0
            top = da[i]
            nb = 1 if top - db[i] - br < 0 else 0
            top += 10 * nb
            r = top - db[i] - br
            cols.append(f"{top}-{db[i]}" + (f"-{br}" if br else "") + f"={r}")
            out.append(r)
            br = nb
        val = int("".join(map(str, out[::-1])))
        return ",".join(cols) + ":" + (str(val) if not br else str(val - 10**w))

    @staticmethod
    def _trace_mul(a: int, b: int, drop_last: bool) -> str:
        w = len(str(a))
        da = _digits(a, w)
        cols, out, c = [], [], 0
        for i in range(w):
            if i == w - 1 and drop_last:
                c = 0
            p = da[i] * b + c
            cols.append(f"{da[i]}*{b}" + (f"+{c}" if c else "") + f"={p}")
            out.append(p % 10)
            c = p // 10
        digits = ([c] if c else []) + out[::-1]
        return ",".join(cols) + ":" + str(int("".join(map(str, digits))))

    # ---- checking -----------------------------------------------------------------------------
    def reward(self, problem: Problem, completion: str) -> float:
        got = extract_final_answer(completion)
        return 1.0 if got is not None and got == problem.answer else 0.0


DEFAULT_DIFFICULTIES = {"add": (2, 3, 4), "sub": (2, 3, 4), "mul": (2, 3)}


def get_task(name: str, difficulties: tuple[int, ...] | None = None) -> ArithTask:
    """``add``, ``sub``, ``mul``; ``add:2`` or ``add:2-3`` restricts the number of digits."""
    if ":" in name:
        name, spec = name.split(":", 1)
        try:
            lo, _, hi = spec.partition("-")
            difficulties = tuple(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise ShiftkitError(f"bad task spec '{name}:{spec}' (use e.g. add:2 or add:2-4)") from None
        if not difficulties or min(difficulties) < 1 or max(difficulties) > 9:
            raise ShiftkitError(f"bad digit range in task spec '{name}:{spec}' (1 to 9 digits)")
    if name not in DEFAULT_DIFFICULTIES:
        raise ShiftkitError(f"unknown task '{name}' (known: {', '.join(DEFAULT_DIFFICULTIES)})")
    return ArithTask(name, difficulties or DEFAULT_DIFFICULTIES[name])


class Mixture:
    """Uniform mixture over several domains (sampling picks a domain, then a problem)."""

    def __init__(self, names: list[str] | tuple[str, ...]):
        if not names:
            raise ShiftkitError("empty task list: give at least one of add, sub, mul")
        self.tasks = {}
        for n in names:
            t = get_task(n)
            self.tasks[t.name] = t
        self.name = "+".join(names)

    def sample(self, rng: random.Random, split: str = "train", difficulty: int | None = None) -> Problem:
        t = self.tasks[rng.choice(list(self.tasks))]
        return t.sample(rng, split, difficulty)

    def task_for(self, problem: Problem) -> ArithTask:
        return self.tasks[problem.domain]

    def trace(self, problem: Problem, rng=None, error_rate: float = 0.0) -> str:
        return self.task_for(problem).trace(problem, rng, error_rate)

    def reward(self, problem: Problem, completion: str) -> float:
        return self.task_for(problem).reward(problem, completion)


def eval_set(names: list[str] | tuple[str, ...], n_per_domain: int, seed: int = 12345) -> list[Problem]:
    """A fixed held-out set: ``n_per_domain`` distinct test-split problems per domain."""
    out: list[Problem] = []
    for name in names:
        task = get_task(name)
        rng = random.Random(f"{seed}:{name}")
        seen: set[str] = set()
        tries = 0
        while len(seen) < n_per_domain:
            tries += 1
            if tries > 100 * n_per_domain:
                raise ShiftkitError(f"cannot find {n_per_domain} distinct test problems for {name}")
            p = task.sample(rng, "test")
            if p.prompt not in seen:
                seen.add(p.prompt)
                out.append(p)
    return out
