import random

import pytest

from shiftkit.tasks import Mixture, eval_set, extract_final_answer, get_task, split_of
from shiftkit.tasks.math_answer import extract_answer, math_reward


@pytest.mark.parametrize("name", ["add", "sub", "mul"])
def test_clean_traces_are_correct_and_checked(name):
    task, rng = get_task(name), random.Random(0)
    for _ in range(300):
        p = task.sample(rng, "train")
        assert task.reward(p, task.trace(p)) == 1.0
        assert task.reward(p, task.trace(p) + "1") == 0.0


def test_trace_formats_by_hand():
    add, sub, mul = get_task("add"), get_task("sub"), get_task("mul")
    p = add._make(347, 285, 3)
    assert add.trace(p) == "7+5=12,4+8+1=13,3+2+1=6:632"
    # the systematic mistake: the last column drops its carry
    assert add.trace(p, random.Random(0), error_rate=1.0) == "7+5=12,4+8+1=13,3+2=5:532"
    assert sub.trace(sub._make(532, 285, 3)) == "12-5=7,13-8-1=4,5-2-1=2:247"
    assert mul.trace(mul._make(347, 8, 3)) == "7*8=56,4*8+5=37,3*8+3=27:2776"
    assert mul.trace(mul._make(347, 8, 3), random.Random(0), 1.0) == "7*8=56,4*8+5=37,3*8=24:2476"


def test_error_rate_is_realised():
    task, rng = get_task("add"), random.Random(1)
    n_err = n_trig = 0
    for _ in range(3000):
        p = task.sample(rng, "train")
        if task.trace_would_err(p):
            n_trig += 1
            n_err += task.reward(p, task.trace(p, rng, 0.6)) == 0.0
    assert 0.55 < n_err / n_trig < 0.65


def test_splits_never_overlap_and_eval_set_is_fixed():
    ev = eval_set(["add", "mul"], 50)
    assert len({p.prompt for p in ev}) == 100 and all(split_of(p.prompt) == "test" for p in ev)
    assert [p.prompt for p in ev] == [p.prompt for p in eval_set(["add", "mul"], 50)]
    mix, rng = Mixture(["add", "mul"]), random.Random(3)
    train = {mix.sample(rng, "train").prompt for _ in range(2000)}
    assert not train & {p.prompt for p in ev}


def test_difficulty_controls_digits():
    p = get_task("add").sample(random.Random(0), "train", difficulty=4)
    a, b = p.meta
    assert 1000 <= a <= 9999 and 1000 <= b <= 9999


def test_answer_extraction():
    assert extract_final_answer("7+5=12:12") == "12"
    assert extract_final_answer("garbage") is None
    assert extract_final_answer("1+2=3:003") == "3"


def test_math_verify_checker_on_strings():
    assert extract_answer("... so \\boxed{\\frac{1}{2}} is it") == "\\frac{1}{2}"
    assert extract_answer("She has 18 eggs.\n#### 18") == "18"
    assert extract_answer("Answer: 42") == "42"
    assert math_reward("The answer is \\boxed{0.5}", "\\frac{1}{2}") == 1.0
    assert math_reward("#### 1,234", "1234") == 1.0
    assert math_reward("Answer: 7", "8") == 0.0
    assert math_reward("no numbers here", "8") == 0.0
