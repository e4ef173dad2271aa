"""The task interface: prompt -> completion -> reward, with an exact checker.

A :class:`Problem` carries its prompt, the gold answer and enough metadata to rebuild it. A task
family generates problems from a seed and a difficulty, writes supervised traces (optionally with
systematic mistakes, see :mod:`shiftkit.tasks.arith`), and scores completions with a verifier that
serves both evaluation and RL reward.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol


@dataclasses.dataclass(frozen=True)
class Problem:
    domain: str
    prompt: str
    answer: str
    difficulty: int = 0
    meta: tuple = ()

    @property
    def key(self) -> str:
        return f"{self.domain}:{self.prompt}"

    def to_dict(self) -> dict[str, Any]:
        return {"domain": self.domain, "prompt": self.prompt, "answer": self.answer, "difficulty": self.difficulty}


class Task(Protocol):
    name: str

    def sample(self, rng, split: str, difficulty: int | None = None) -> Problem: ...

    def trace(self, problem: Problem, rng=None, error_rate: float = 0.0) -> str: ...

    def reward(self, problem: Problem, completion: str) -> float: ...
