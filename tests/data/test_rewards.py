"""Rewards: the built-ins, TRL-signature user functions by import path, weights and None, metrics,
and one-line errors naming the function."""

import math
import sys
import textwrap

import pytest

from shiftkit.data import DataArgs, Example, load_prompts
from shiftkit.errors import ShiftkitError
from shiftkit.rewards import BUILTIN, Rewards, completion_text, needed_columns, register_reward, resolve_reward


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "myrewards.py").write_text(textwrap.dedent('''
        def length_penalty(prompts, completions, **kwargs):
            return [-len(c) / 100 for c in completions]

        def uses_solution(prompts, completions, solution, **kwargs):
            return [1.0 if s in c else 0.0 for c, s in zip(completions, solution)]

        def only_even(prompts, completions, level, **kwargs):  # None: not applicable
            return [1.0 if lv % 2 == 0 else None for lv in level]

        def sees_everything(prompts, completions, completion_ids, trainer_state, log_metric, log_extra, **kw):
            log_metric("mine/step", trainer_state.global_step)
            log_extra("n_ids", [len(x) for x in completion_ids])
            return [0.0] * len(completions)

        def conversational(prompts, completions, **kwargs):
            return [1.0 if p[-1]["role"] == "user" and c[0]["role"] == "assistant" else 0.0
                    for p, c in zip(prompts, completions)]

        def boom(prompts, completions, **kwargs):
            raise ValueError("bad thing\\nsecond line")

        def short(prompts, completions, **kwargs):
            return [1.0]

        def text(prompts, completions, **kwargs):
            return ["yes"] * len(completions)

        async def later(prompts, completions, **kwargs):
            return [0.5] * len(completions)

        import re

        def trl_docs_format(completions, **kwargs):  # TRL's documented example for conversational data
            pattern = r"^<think>.*?</think><answer>.*?</answer>$"
            completion_contents = [completion[0]["content"] for completion in completions]
            matches = [re.match(pattern, content) for content in completion_contents]
            return [1.0 if match else 0.0 for match in matches]

        NOT_A_FUNCTION = 3
    '''))
    sys.modules.pop("myrewards", None)  # never a module of that name imported earlier in the session
    monkeypatch.syspath_prepend(str(tmp_path))  # (also invalidates importlib's finder caches)
    yield tmp_path
    sys.modules.pop("myrewards", None)


def test_builtins_on_completions():
    r = Rewards(["math", "exact", "arith", "format"])
    comps = ["So 3 * 5 = 15.\nAnswer: 15 dollars", "15", "3*5=15:15", "I think 16"]
    res = r(["q"] * 4, comps, {"answer": ["15"] * 4})
    assert res.per_reward["math"] == [1.0, 1.0, 1.0, 0.0]
    assert res.per_reward["exact"] == [0.0, 1.0, 0.0, 0.0]
    assert res.per_reward["arith"] == [0.0, 0.0, 1.0, 0.0]
    assert res.per_reward["format"] == [1.0, 0.0, 0.0, 0.0]
    assert res.total == [2.0, 2.0, 2.0, 0.0]
    assert set(BUILTIN) >= {"math", "exact", "arith", "format"}


def test_weights_none_and_metrics_by_hand(user_module):
    r = Rewards(["math", "myrewards:only_even"], [2.0, 0.5])
    res = r(["q"] * 3, ["Answer: 4", "Answer: 5", "Answer: 4"], {"answer": ["4", "4", "4"], "level": [0, 1, 3]})
    assert res.per_reward["math"] == [1.0, 0.0, 1.0]
    assert res.per_reward["only_even"][0] == 1.0 and math.isnan(res.per_reward["only_even"][1])
    assert res.total == [2.0 * 1 + 0.5 * 1, 0.0, 2.0]  # None leaves the reward out of the sum
    m = res.metrics
    assert m["rewards/math/mean"] == pytest.approx(2 / 3)
    assert m["rewards/math/std"] == pytest.approx(math.sqrt(((1 / 3) ** 2 * 2 + (2 / 3) ** 2) / 2))
    assert m["rewards/only_even/mean"] == 1.0 and m["rewards/only_even/none_frac"] == pytest.approx(2 / 3)
    assert m["reward"] == pytest.approx((2.5 + 0 + 2) / 3)
    # every reward None -> unscorable (NaN total), like TRL
    res = Rewards(["myrewards:only_even"])(["q"], ["x"], {"level": [1]})
    assert math.isnan(res.total[0]) and res.scorable == [False] and math.isnan(res.metrics["reward"])


def test_user_function_gets_trl_arguments(user_module):
    r = Rewards(["myrewards:sees_everything", "myrewards:uses_solution", "myrewards:later"])
    res = r(["p1", "p2"], ["a 42", "b"], {"solution": ["42", "7"]}, completion_ids=[[1, 2, 3], [4]], step=9)
    assert res.per_reward["uses_solution"] == [1.0, 0.0] and res.per_reward["later"] == [0.5, 0.5]
    assert res.metrics["mine/step"] == 9 and res.extra == {"n_ids": [3, 1]}
    assert needed_columns(resolve_reward("myrewards:uses_solution")[1]) == ["solution"]
    assert needed_columns(BUILTIN["math"]) == ["answer"] and needed_columns(BUILTIN["format"]) == []


def test_score_examples_passes_columns_and_conversational_completions(user_module, tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"question": "2+2?", "sol": "4", "level": 2}\n')
    ds = load_prompts(DataArgs(data=str(p), prompt_key="question", answer_key="sol", system_prompt="Be exact."))
    r = Rewards(["math", "myrewards:conversational", "myrewards:only_even", "myrewards:trl_docs_format"])
    res = r.score([ds[0], ds[0]], ["Answer: 4", "<think>2+2</think><answer>5</answer>"])
    assert res.per_reward["math"] == [1.0, 0.0]  # answer_key=sol reaches rewards as `answer`
    assert res.per_reward["trl_docs_format"] == [0.0, 1.0]
    assert res.per_reward["conversational"] == [1.0, 1.0] and res.per_reward["only_even"] == [1.0, 1.0]
    assert completion_text([{"role": "assistant", "content": "hi"}]) == "hi"


def test_a_file_path_reward(tmp_path):
    f = tmp_path / "r.py"
    f.write_text("def half(prompts, completions, **kw):\n    return [0.5 for _ in completions]\n")
    assert Rewards([f"{f}:half"])(["q"], ["c"]).total == [0.5]


@pytest.mark.parametrize("spec,pattern", [
    ("mth", r"unknown reward 'mth' \(did you mean 'math'\? built in: arith, exact, format, kernel, math; or a function as "
            r"pkg.module:function\)"),
    ("nosuchpkg.mod:fn", r"reward 'nosuchpkg.mod:fn': cannot import module 'nosuchpkg.mod' \(No module named"),
    ("myrewards:missing", r"reward 'myrewards:missing': module 'myrewards' has no function 'missing'"),
    ("myrewards:NOT_A_FUNCTION", r"'NOT_A_FUNCTION' in 'myrewards' is not callable"),
    ("/no/such/file.py:f", r"reward '/no/such/file.py:f': file not found"),
])
def test_unresolvable_rewards_are_one_line_errors(user_module, spec, pattern):
    with pytest.raises(ShiftkitError, match=pattern) as e:
        Rewards([spec])
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name,pattern", [
    ("boom", r"reward 'boom' raised ValueError: bad thing$"),
    ("short", r"reward 'short' returned 1 rewards for 2 completions"),
    ("text", r"reward 'text' returned 'yes' for completion 0; expected a float or None"),
])
def test_misbehaving_rewards_are_one_line_errors(user_module, name, pattern):
    with pytest.raises(ShiftkitError, match=pattern) as e:
        Rewards([f"myrewards:{name}"])(["a", "b"], ["x", "y"])
    assert "\n" not in str(e.value)


def test_weights_columns_and_registry_checks(user_module):
    with pytest.raises(ShiftkitError, match=r"reward_weights has 1 values for 2 rewards \(math, format\)"):
        Rewards(["math", "format"], [1.0])
    r = Rewards(["math", "myrewards:uses_solution"])
    assert r.need_answer() == "reward 'math'"
    with pytest.raises(ShiftkitError, match=r"reward 'uses_solution' needs column 'solution', which d.jsonl lacks; "
                                            r"columns: question, answer"):
        r.check_columns(["question", "answer"], "d.jsonl")
    with pytest.raises(ShiftkitError, match="no reward given"):
        Rewards([])
    with pytest.raises(ValueError, match="already registered"):
        register_reward("math")(lambda **kw: [])
    assert Rewards("math,format").names == ["math", "format"]
    assert Rewards(["myrewards:length_penalty", "myrewards:length_penalty"]).names == ["length_penalty",
                                                                                         "length_penalty_1"]
    ex = Example("q", "1", {"answer": "1"}, "w")
    assert Rewards(["exact"]).score([ex], ["1"]).total == [1.0]
