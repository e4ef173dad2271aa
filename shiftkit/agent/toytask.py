"""A toy multi-turn tool task for proving the agentic-RL machinery with tiny models: arithmetic with a
calculator the model must call with the right syntax.

    prompt      Q:37*58\\n
    assistant   calc(37*58)<eos>          (a tool call; any other non-answer text is a failed call)
    tool        R:2146\\n                  (environment tokens: masked out of every loss)
    assistant   A:2146<eos>               (an answer ends the episode)

Reward 1 when the final answer equals the true value, else 0. Two-digit products are beyond what a
0.2M-parameter model can compute, so the reward needs a correctly-formed call and a faithful copy of
the tool's output; a model can also answer directly (a guess), which is how it fails. Episodes end at
an answer or after ``max_turns`` assistant turns.

:func:`demo_trajectory` writes noisy demonstrations (correct calls, malformed calls, wrong operands,
direct guesses) used to warm-start the policy by behaviour cloning, the analogue of the paper's
single-turn warm-up: the warm policy has the format and a mediocre success rate for RL to improve.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

CALL_RE = re.compile(r"^calc\((\d{1,4})([+*-])(\d{1,4})\)$")
ANSWER_RE = re.compile(r"^A:(-?\d+)$")


@dataclass
class ToyProblem:
    a: int
    op: str
    b: int

    @property
    def prompt(self) -> str:
        return f"Q:{self.a}{self.op}{self.b}\n"

    @property
    def value(self) -> int:
        return {"+": self.a + self.b, "-": self.a - self.b, "*": self.a * self.b}[self.op]


def draw_problem(rng: random.Random, ops: str = "*+") -> ToyProblem:
    return ToyProblem(rng.randint(10, 99), rng.choice(ops), rng.randint(10, 99))


def calculator(call_text: str) -> str:
    """The tool: ``calc(a<op>b)`` -> ``R:<value>\\n``; anything else -> ``R:error\\n``."""
    m = CALL_RE.match(call_text.strip())
    if not m:
        return "R:error\n"
    a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
    return f"R:{ {'+': a + b, '-': a - b, '*': a * b}[op] }\n"


@dataclass
class ToyEpisode:
    problem: ToyProblem
    turns: list[str] = field(default_factory=list)  # assistant texts (without EOS)
    tool_outputs: list[str] = field(default_factory=list)
    answer: int | None = None
    malformed_calls: int = 0

    @property
    def reward(self) -> float:
        return float(self.answer is not None and self.answer == self.problem.value)

    @property
    def called_correctly(self) -> bool:
        return any(o.startswith("R:") and o != "R:error\n" for o in self.tool_outputs)


def step(ep: ToyEpisode, text: str) -> str | None:
    """Apply one assistant turn. Returns the tool output to append, or None if the episode ended."""
    text = text.strip()
    ep.turns.append(text)
    m = ANSWER_RE.match(text)
    if m:
        ep.answer = int(m.group(1))
        return None
    out = calculator(text)
    ep.malformed_calls += int(out == "R:error\n")
    ep.tool_outputs.append(out)
    return out


def demo_trajectory(rng: random.Random, p: ToyProblem, p_correct: float = 0.4) -> list[str]:
    """A noisy demonstration: the assistant turns (tool outputs follow from :func:`calculator`)."""
    u = rng.random()
    guess = f"A:{rng.randint(100, 9999) if p.op == '*' else rng.randint(20, 198)}"
    if u < p_correct:
        return [f"calc({p.a}{p.op}{p.b})", f"A:{p.value}"]
    if u < p_correct + 0.2:
        return [f"calc {p.a}{p.op}{p.b}", guess]  # malformed call, then a guess
    if u < p_correct + 0.4:
        wrong = p.a + rng.choice([-1, 1])
        return [f"calc({wrong}{p.op}{p.b})", f"A:{ {'+': wrong + p.b, '-': wrong - p.b, '*': wrong * p.b}[p.op] }"]
    return [guess]  # no tool call: a guess
