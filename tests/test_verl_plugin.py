"""shiftkit's Direct-OPD inside verl, called through verl's own registries on verl's batch type, gives the
native loop's numbers.

Mirrored engine: **verl 0.9.1** (PyPI), files:

* ``verl/trainer/ppo/core_algos.py``: ``register_adv_est`` / ``get_adv_estimator_fn`` and
  ``register_policy_loss`` / ``get_policy_loss_fn``; ``compute_policy_loss_vanilla`` (the K = 1 cross-check);
  ``agg_loss`` (``token-mean`` = masked sum / global ``batch_num_tokens`` * ``dp_size``);
* ``verl/trainer/ppo/ray_trainer.py`` ``compute_advantage``, the branch for registered estimators: it
  calls ``fn(token_level_rewards=batch["token_level_rewards"], response_mask=batch["response_mask"],
  config=<algorithm config>, index=non_tensor_batch["uid"])`` (reproduced in :func:`verl_compute_advantage`:
  importing ``ray_trainer`` needs ``torchdata``, which is not installed here);
* ``verl/workers/utils/losses.py`` ``ppo_loss``: ``policy_loss_fn(old_log_prob=..., log_prob=...,
  advantages=..., response_mask=..., loss_agg_mode=config.loss_agg_mode, config=<ActorConfig with
  global_batch_info>, rollout_is_weights=...)``;
* ``verl/protocol.py`` ``DataProto``; ``verl/single_controller/base/worker.py`` ``Worker`` (reads
  WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT) and ``decorator.register``.

The native numbers are shiftkit's OPD loop's own: :func:`shiftkit.opd.loop.opd_signal` (the advantage)
and :func:`shiftkit.opd.loop.opd_policy_loss` (loss and gradient).
"""

import copy
import types

import numpy as np
import pytest
import torch

verl = pytest.importorskip("verl", reason="verl is an optional test dependency (Makefile: --no-deps verl==0.9.1)")

from shiftkit import logprobs as LP  # noqa: E402
from shiftkit import loopkit as kit  # noqa: E402
from shiftkit import microbatch as MB  # noqa: E402
from shiftkit.dist import Dist
from shiftkit.models import TinyModelSpec, make_char_tokenizer, make_tiny_model  # noqa: E402
from shiftkit.opd.loop import OPDConfig, opd_policy_loss, opd_signal  # noqa: E402

SPEC = TinyModelSpec(hidden_size=32, num_hidden_layers=1, intermediate_size=64, num_attention_heads=2,
                     num_key_value_heads=1, head_dim=16)
ONE = Dist()  # one process (the real launcher-free Dist: shard, is_main, barrier, gathered)
PROMPTS = ["Q:12+7=", "Q:3*4=", "hello"]
CLIP = 0.2


@pytest.fixture(scope="module")
def world():
    from verl import DataProto

    tok = make_char_tokenizer()
    student, teacher, ref = (make_tiny_model(SPEC, vocab_size=len(tok), seed=s) for s in (0, 1, 2))
    _, roll = kit.rollout(student, tok, PROMPTS, 2, 5, 0, ONE, max_new_tokens=10, temperature=1.0)
    for b, n in ((0, 5), (3, 2)):  # rows that ended early (the untrained model never samples EOS): padding
        roll.completion_mask_BT[b, n:] = 0
        roll.completion_ids_BT[b, n:] = tok.pad_token_id
    tensors = {"prompts": roll.prompt_ids_BP, "responses": roll.completion_ids_BT,
               "response_mask": roll.completion_mask_BT,
               "attention_mask": torch.cat([roll.prompt_mask_BP, roll.completion_mask_BT], 1),
               "input_ids": torch.cat([roll.prompt_ids_BP, roll.completion_ids_BT], 1)}
    uid = np.array([str(i // 2) for i in range(len(roll.texts))], dtype=object)
    return types.SimpleNamespace(tok=tok, student=student, teacher=teacher, ref=ref, roll=roll,
                                 make=lambda: DataProto.from_dict(tensors=dict(tensors), non_tensors={"uid": uid}))


def verl_compute_advantage(data, name: str):
    """``ray_trainer.compute_advantage``'s branch for a registered estimator (verl 0.9.1, lines 248-259)."""
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo import core_algos

    fn = core_algos.get_adv_estimator_fn(name)
    kw = {"token_level_rewards": data.batch["token_level_rewards"], "response_mask": data.batch["response_mask"],
          "config": AlgoConfig(adv_estimator=name)}
    if "uid" in data.non_tensor_batch:
        kw["index"] = data.non_tensor_batch["uid"]
    data.batch["advantages"], data.batch["returns"] = fn(**kw)
    return data


def actor_config(**kw):
    from verl.workers.config import ActorConfig

    return ActorConfig(strategy="fsdp", rollout_n=2, ppo_micro_batch_size_per_gpu=1, clip_ratio=CLIP, **kw)


@pytest.fixture()
def scorer(world, monkeypatch):
    """The scorer worker constructed in this process (verl's Worker reads its rank from the environment);
    its models are the test's, so nothing is loaded from disk."""
    from shiftkit.integrations.verl import DirectOPDScorerWorker

    for k, v in {"WORLD_SIZE": "1", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29555"}.items():
        monkeypatch.setenv(k, v)
    return lambda **kw: DirectOPDScorerWorker("teacher", "teacher_ref", models=(world.teacher, world.ref), **kw)


def native(world, mode: str, k: int, scale: float, clip: float):
    """The OPD loop's signal and loss on the same rollouts: (adv_BTK, ids_BTK, loss, grads)."""
    cfg = OPDConfig(reward_mode=mode, top_k=k, reward_scale=scale,
                    delta_clip=clip, temperature=1.0)
    roll = world.roll
    mbs = MB.micro_batches(roll.prompt_mask_BP, roll.completion_mask_BT, None)
    assert len(mbs) == 1
    sig = opd_signal(cfg, world.student, world.teacher, world.ref, roll, mbs, dtype=None, chunk=None, keep_old=False)
    student = copy.deepcopy(world.student)
    m = roll.completion_mask_BT
    s = LP.model_head(student, roll.prompt_ids_BP, roll.prompt_mask_BP, roll.completion_ids_BT, m, temperature=1.0)
    loss, _, _ = opd_policy_loss(cfg, s, sig, mbs[0], roll.completion_ids_BT, m, None, on_policy=True, clip_low=CLIP,
                                 clip_high=CLIP, num_tokens=m.sum(), num_seqs=m.shape[0], chunk=None)
    loss.backward()
    return sig.adv_BTK, sig.ids_BTK, loss.detach(), {n: p.grad.clone() for n, p in student.named_parameters()}


def through_verl(world, scorer, mode: str, k: int, scale: float, clip: float):
    """The same step inside verl: scorer worker -> rm_scores -> registered estimator -> registered loss."""
    from verl.trainer.ppo import core_algos

    from shiftkit.integrations.verl import NAME, student_candidates

    data = world.make()
    if mode == "student_topk":  # what an actor supporting candidates writes
        ids, slp = student_candidates(world.student, data, k)
        data.batch["opd_candidate_ids"], data.batch["opd_student_logp"] = ids, slp
    out = scorer(reward_scale=scale, delta_clip=clip).compute_rm_score(data)
    data.batch["token_level_rewards"] = out.batch["rm_scores"]
    data = verl_compute_advantage(data, NAME)
    student = copy.deepcopy(world.student)
    r = world.roll
    s = LP.model_head(student, r.prompt_ids_BP, r.prompt_mask_BP, r.completion_ids_BT, r.completion_mask_BT,
                      temperature=1.0)
    if mode == "student_topk":
        log_prob = LP.gather_logprobs(s, data.batch["opd_candidate_ids"])
    else:  # stock verl's actor: the sampled token's log-prob, [B, T]
        log_prob = LP.token_logprobs(s, r.completion_ids_BT)
    cfg = actor_config()  # actor.policy_loss.loss_mode=shiftkit_direct_opd selects it in verl
    loss, metrics = core_algos.get_policy_loss_fn(NAME)(
        old_log_prob=log_prob.detach(), log_prob=log_prob, advantages=data.batch["advantages"],
        response_mask=data.batch["response_mask"], loss_agg_mode=cfg.loss_agg_mode, config=cfg, rollout_is_weights=None)
    loss.backward()
    return data, log_prob, loss.detach(), {n: p.grad.clone() for n, p in student.named_parameters()}


@pytest.mark.parametrize("mode,k,scale,clip", [("sampled", 1, 1.0, 0.0), ("student_topk", 4, 1.0, 0.0),
                                               ("student_topk", 4, 0.5, 0.05)])
def test_registered_functions_on_a_dataproto_give_the_native_numbers(world, scorer, mode, k, scale, clip):
    adv_n, ids_n, loss_n, grads_n = native(world, mode, k, scale, clip)
    data, _, loss_v, grads_v = through_verl(world, scorer, mode, k, scale, clip)
    mask = world.roll.completion_mask_BT.bool()
    adv_v = data.batch["advantages"]
    adv_v = adv_v.unsqueeze(-1) if adv_v.dim() == 2 else adv_v
    if mode == "student_topk":
        assert torch.equal(data.batch["opd_candidate_ids"][mask], ids_n[mask])
    assert adv_v.shape == adv_n.shape and float(adv_v[mask].abs().max()) > 1e-3  # a real signal
    torch.testing.assert_close(adv_v[mask], adv_n[mask].float(), rtol=0, atol=1e-6)
    assert bool((adv_v[~mask] == 0).all()) and bool((~mask).any())  # zero on padding (and there is padding)
    torch.testing.assert_close(loss_v, loss_n, rtol=0, atol=1e-6)
    for n in grads_n:
        torch.testing.assert_close(grads_v[n], grads_n[n], rtol=1e-5, atol=1e-7)


def test_at_k1_it_is_verls_vanilla_loss_with_verls_global_aggregation(world, scorer):
    """K = 1 (sampled, stock verl): the registered loss equals verl's own ``vanilla`` PPO loss at ratio 1,
    including verl's multi-GPU convention (global token count, times ``dp_size``)."""
    from verl.trainer.ppo import core_algos

    from shiftkit.integrations.verl import NAME

    data, log_prob, _, _ = through_verl(world, scorer, "sampled", 1, 1.0, 0.0)
    mask = data.batch["response_mask"]
    n_local = int(mask.sum())
    for info in ({}, {"dp_size": 2, "batch_num_tokens": 3 * n_local, "global_batch_size": 12}):
        out = {}
        for name in (NAME, "vanilla"):
            cfg = actor_config()
            cfg.global_batch_info.update(info)
            lp = log_prob.detach().clone().requires_grad_(True)
            loss, _ = core_algos.get_policy_loss_fn(name)(old_log_prob=lp.detach(), log_prob=lp,
                                                          advantages=data.batch["advantages"], response_mask=mask,
                                                          loss_agg_mode="token-mean", config=cfg)
            loss.backward()
            out[name] = (loss.detach(), lp.grad)
        torch.testing.assert_close(out[NAME][0], out["vanilla"][0], rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(out[NAME][1], out["vanilla"][1], rtol=1e-6, atol=1e-9)


def test_registration_through_verls_plugin_mechanism_and_named_errors(world):
    from verl.trainer.ppo import core_algos
    from verl.utils.import_utils import import_external_libs

    import_external_libs(["shiftkit.integrations.verl"])  # VERL_USE_EXTERNAL_MODULES=shiftkit.integrations.verl
    from shiftkit.integrations import verl as plugin

    assert core_algos.get_adv_estimator_fn(plugin.NAME) is plugin.direct_opd_advantage
    assert core_algos.get_policy_loss_fn(plugin.NAME) is plugin.direct_opd_policy_loss
    plugin.register()  # idempotent
    z = torch.zeros(2, 3)
    m = torch.ones(2, 3)
    with pytest.raises(ValueError, match="loss_agg_mode='token-sum' is not supported"):
        plugin.direct_opd_policy_loss(z, z, z, m, "token-sum", actor_config())
    with pytest.raises(ValueError, match="rollout importance weights"):
        plugin.direct_opd_policy_loss(z, z, z, m, "token-mean", actor_config(), rollout_is_weights=m)
    with pytest.raises(ValueError, match="do not match"):  # top-K advantages, stock [B, T] log-probs
        plugin.direct_opd_policy_loss(z, z, torch.zeros(2, 3, 4), m, "token-mean", actor_config())
    with pytest.raises(ValueError, match="not read by Direct-OPD"):
        plugin.direct_opd_advantage(z, m, None, sum_pi_squared=z)


def test_the_example_config_only_sets_keys_verl_has():
    """configs/verl/direct_opd.yaml: every key it sets exists in verl 0.9.1's ppo_trainer config (a typo
    would be silently added by Hydra's merge), and it selects the registered estimator and loss."""
    from pathlib import Path

    import yaml
    from verl.trainer.config import __file__ as cfg_init

    from shiftkit.integrations.verl import NAME

    ours = yaml.safe_load((Path(__file__).parents[1] / "configs" / "verl" / "direct_opd.yaml").read_text())
    theirs = yaml.safe_load((Path(cfg_init).parent / "_generated_ppo_trainer.yaml").read_text())

    def leaves(d, prefix=""):
        for k, v in d.items():
            yield from leaves(v, f"{prefix}{k}.") if isinstance(v, dict) else [(prefix + k, v)]

    def has(d, dotted):
        for part in dotted.split("."):
            if not isinstance(d, dict) or part not in d:
                return False
            d = d[part]
        return True

    keys = dict(leaves({k: v for k, v in ours.items() if k not in ("hydra", "defaults")}))
    assert keys and [k for k in keys if not has(theirs, k)] == []
    assert keys["algorithm.adv_estimator"] == NAME == keys["actor_rollout_ref.actor.policy_loss.loss_mode"]
