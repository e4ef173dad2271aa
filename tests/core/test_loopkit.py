"""The training kit: one seed formula, one prompt draw shared by GRPO and OPD, one off-policy test, the
no-signal guard of the optimizer step. (Kill-and-resume and DDP are tested per loop: tests/core/test_training.py,
tests/opd/test_cli.py, tests/agent/test_agent_rl.py.)"""

import random

import torch

from shiftkit import loopkit as kit
from shiftkit.dist import Dist


def test_row_seed_formula_by_hand():
    assert kit.row_seed(0, 0, 0, 0) == 0
    assert kit.row_seed(2, 3, 4, 5) == 2 * 1_000_003 + 3 * 10_007 + 4 * 101 + 5


def test_grpo_and_opd_draw_the_same_problems_on_the_same_seed():
    from shiftkit.opd.loop import OPDConfig, PromptSource
    from shiftkit.tasks import Mixture

    mix = Mixture(["add"])
    grpo = kit.draw_prompts(lambda rng: mix.sample(rng, "train"), 3, 7, 5)
    opd = PromptSource(OPDConfig(student="s", teacher="t", teacher_ref="r", tasks=["add"])).draw(3, 7, 5)
    assert [p.prompt for p in grpo] == [p.prompt for p in opd]
    assert [p.prompt for p in grpo] != [p.prompt for p in kit.draw_prompts(lambda r: mix.sample(r, "train"), 3, 8, 5)]
    rng = random.Random("rl:3:7")
    assert kit.draw_prompts(lambda r: r.random(), 3, 7, 2) == [rng.random(), rng.random()]


def test_needs_old_logprobs():
    assert not kit.needs_old_logprobs(0.0, 0.0, 1, 1.0)
    assert kit.needs_old_logprobs(0.2, 0.0, 1)
    assert kit.needs_old_logprobs(0.0, 0.28, 1)  # an upper-only clip
    assert kit.needs_old_logprobs(0.0, 0.0, 2)
    assert kit.needs_old_logprobs(0.0, 0.0, 1, top_p=0.9)


def test_optimizer_step_computes_the_gradient_but_skips_adam_without_signal():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = kit.make_optimizer(model, 1e-1, 0.0)
    d = Dist()
    loss = model(torch.ones(1, 3)).sum()
    kit.optimizer_step(loss, model, opt, d, 1.0)  # a real step: Adam now has momentum
    before = [p.detach().clone() for p in model.parameters()]
    gnorm = kit.optimizer_step(model(torch.ones(1, 3)).sum() * 0.0, model, opt, d, 1.0, skip=True)
    assert gnorm == 0.0 and all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    kit.optimizer_step(model(torch.ones(1, 3)).sum() * 0.0, model, opt, d, 1.0)  # without the guard, momentum moves it
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
