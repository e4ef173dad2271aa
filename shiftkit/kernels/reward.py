"""Rewards: pure functions of (correct, speedups). Each returns (reward, reason)."""

from __future__ import annotations

import math
from collections.abc import Callable


def faster(speedup: float | None, margin: float = 0.05) -> bool:
    """CUDA Agent's b(t, t0) = 1[(t0 - t)/t0 > margin], written with speedup s = t0/t: 1 - 1/s > margin."""
    return speedup is not None and speedup > 0 and (1.0 - 1.0 / speedup) > margin


def milestone_reward(correct: bool, speedup_eager: float | None, speedup_compile: float | None,
                     margin: float = 0.05) -> tuple[float, str]:
    """The paper's schedule: -1 incorrect/hacked; +1 correct; +2 >margin faster than eager; +3 also than compile."""
    if not correct:
        return -1.0, "incorrect"
    fe, fc = faster(speedup_eager, margin), faster(speedup_compile, margin)
    if fe and fc:
        return 3.0, f"correct, >{margin:.0%} faster than eager ({speedup_eager:.2f}x) and torch.compile ({speedup_compile:.2f}x)"
    if fe:
        sc = "n/a" if speedup_compile is None else f"{speedup_compile:.2f}x"
        return 2.0, f"correct, >{margin:.0%} faster than eager ({speedup_eager:.2f}x) but not torch.compile ({sc})"
    se = "n/a" if speedup_eager is None else f"{speedup_eager:.2f}x"
    return 1.0, f"correct, not >{margin:.0%} faster than eager ({se})"


def log_speedup_reward(correct: bool, speedup_eager: float | None, speedup_compile: float | None,
                       incorrect: float = -1.0, clip: float = 3.0, baseline: str = "eager") -> tuple[float, str]:
    """Continuous: clip(log(speedup), -clip, clip) vs eager, compile or the best of both ("best")."""
    if not correct:
        return incorrect, "incorrect"
    if baseline == "eager":
        s = speedup_eager
    elif baseline == "compile":
        s = speedup_compile
    elif baseline == "best":
        xs = [x for x in (speedup_eager, speedup_compile) if x is not None]
        s = min(xs) if xs else None
    else:
        raise ValueError(f"unknown baseline {baseline!r}; valid: eager, compile, best")
    if s is None:
        return 0.0, f"correct, no {baseline} timing (reward 0)"
    r = max(-clip, min(clip, math.log(s)))
    return r, f"correct, log speedup vs {baseline} = log({s:.3f}) = {r:.3f}"


REWARDS: dict[str, Callable[..., tuple[float, str]]] = {"milestone": milestone_reward, "log_speedup": log_speedup_reward}


def get_reward_fn(name: str) -> Callable[..., tuple[float, str]]:
    if name not in REWARDS:
        raise ValueError(f"unknown reward {name!r}; valid: {', '.join(REWARDS)}")
    return REWARDS[name]


def threshold(margin: float = 0.05) -> float:
    """The speedup at which ``faster`` flips: 1 - 1/s = margin  <=>  s = 1 / (1 - margin)."""
    return 1.0 / (1.0 - margin)


def paired_milestone_reward(correct: bool, eager: str | None, compile_: str | None, speedup_eager: float | None,
                            speedup_compile: float | None, margin: float = 0.05) -> tuple[float, str, bool]:
    """Milestones from paired-timing decisions ("above"/"below"/"undecided" the threshold, each from a
    confidence interval). A milestone is granted only when its interval clears the threshold; when the
    deciding interval straddles it, the lower milestone is given and the result is inconclusive.
    Returns (reward, reason, inconclusive)."""
    if not correct:
        return -1.0, "incorrect", False
    se = "n/a" if speedup_eager is None else f"{speedup_eager:.2f}x"
    sc = "n/a" if speedup_compile is None else f"{speedup_compile:.2f}x"
    if eager == "above":
        if compile_ == "above":
            return 3.0, f"correct, >{margin:.0%} faster than eager ({se}) and torch.compile ({sc}), both CIs clear", False
        if compile_ == "undecided":
            return 2.0, f"correct, >{margin:.0%} faster than eager ({se}); vs torch.compile ({sc}) inconclusive", True
        return 2.0, f"correct, >{margin:.0%} faster than eager ({se}) but not torch.compile ({sc})", False
    if eager == "undecided":
        return 1.0, f"correct; >{margin:.0%} faster than eager ({se}) inconclusive", True
    return 1.0, f"correct, not >{margin:.0%} faster than eager ({se})", False
