"""The template-generated word problems: deterministic, train/test disjoint, answers the checker accepts,
and the committed held-out file is exactly what the generator writes."""

import pytest

from shiftkit.data import DataArgs, load_eval
from shiftkit.errors import ShiftkitError
from shiftkit.tasks.math_answer import math_reward
from shiftkit.tasks.wordproblems import TEMPLATES, TEST_FILE, generate, load_test_set, split_of


def test_deterministic_and_seeded():
    assert generate(50, "train", seed=3) == generate(50, "train", seed=3)
    assert generate(50, "train", seed=3) != generate(50, "train", seed=4)


def test_train_and_test_never_share_a_question():
    train = {r["question"] for r in generate(3000, "train", seed=0)}
    test = {r["question"] for r in generate(300, "test", seed=0)}
    assert not train & test
    assert all(split_of(q) == "train" for q in train) and all(split_of(q) == "test" for q in test)


def test_every_template_and_worked_solutions_check():
    rows = generate(len(TEMPLATES) * 20, "train", seed=1)
    assert {r["template"] for r in rows} == set(TEMPLATES)
    assert len({r["question"] for r in rows}) == len(rows)
    for r in rows:
        assert int(r["answer"]) == int(r["answer"])  # an integer
        assert r["solution"].endswith(f"Answer: {r['answer']}")
        assert math_reward(r["solution"], r["answer"]) == 1.0, r
    assert any(int(r["answer"]) < 0 for r in rows) and any(int(r["answer"]) >= 1000 for r in rows)


def test_committed_test_file_is_the_generator_output():
    rows = load_test_set()
    assert len(rows) == 100
    want = [{k: r[k] for k in ("question", "answer", "template")} for r in generate(100, "test", seed=0)]
    assert rows == want
    ds = load_eval(DataArgs(data=str(TEST_FILE), prompt_key="question"), need_answer="reward 'math'")
    assert len(ds) == 100 and ds[0].answer == rows[0]["answer"]


def test_bad_arguments():
    with pytest.raises(ShiftkitError, match="split must be train or test"):
        generate(5, "dev")
    with pytest.raises(ShiftkitError, match="n must be positive"):
        generate(0)


def test_answers_are_right_by_recomputing_the_arithmetic():
    """Every "a op b = c" in a worked solution holds, and the last result is the answer (buses: ceil)."""
    import math
    import re

    eq = re.compile(r"(-?[\d,]+(?: [-+*/] -?[\d,]+)+) = (-?[\d,]+)")
    for r in generate(len(TEMPLATES) * 30, "train", seed=2):
        if r["template"] == "buses":
            n, c = map(int, re.findall(r"\d+", r["question"])[:2])
            assert int(r["answer"]) == math.ceil(n / c), r
            continue
        found = eq.findall(r["solution"])
        assert found, r
        for lhs, rhs in found:
            assert eval(lhs.replace(",", "")) == int(rhs.replace(",", "")), r  # noqa: S307 - digits and operators
        assert int(found[-1][1].replace(",", "")) == int(r["answer"]), r
