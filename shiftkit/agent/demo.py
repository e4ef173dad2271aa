"""Demo stage "## 5. Kernel agent": toy tool-task RL (1 seed), the scripted kernel episode, and one
agentic RL step on kernel trajectories. ``demo_stage(ctx) -> dict`` with ``"report"`` (markdown lines).
The lead registers it in :data:`shiftkit.demo.EXTRA_STAGES`."""

from __future__ import annotations

import time
from pathlib import Path


def _kernel_episodes(out: Path, quick: bool) -> tuple[dict, list]:
    from shiftkit.agent.episode import AgentConfig, run_episode
    from shiftkit.agent.scripted import kernel_fix_script, known_solution_files
    from shiftkit.kernels.fixtures import PROBLEMS

    cfg = AgentConfig(final_eval="none" if quick else "profile", eval_baseline_compile=False, eval_timed_calls=10,
                      eval_trials=3)
    res = run_episode(PROBLEMS / "scale_shift_clamp.py", kernel_fix_script(known_solution_files("scale_shift_clamp"), profile=not quick),
                      cfg, out / "scripted_episode.jsonl")
    return res, res["events"]


def demo_stage(ctx: dict) -> dict:
    import torch

    from shiftkit.agent.agentic_rl import AgenticRLConfig, kernel_rl_step, run_agentic_rl

    cfg, quick = ctx["cfg"], ctx.get("preset") == "quick"
    out = Path(ctx["out"]) / "agent"
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(max(1, int(getattr(cfg, "threads", 1))))
    t0 = time.time()
    rl = run_agentic_rl(AgenticRLConfig(
        out=str(out / "toy_rl" / "ppo_seed0"), warm_dir=str(out / "toy_rl" / ("warm_quick" if quick else "warm")),
        steps=2 if quick else 15, warm_steps=20 if quick else 250, value_pretrain_steps=2 if quick else 20,
        eval_n=8 if quick else 64, eval_every=0 if quick else 5, prompts_per_step=4 if quick else 8,
        group_size=4 if quick else 8), progress=bool(getattr(cfg, "progress", False)))
    t_rl = time.time() - t0
    ep, events = _kernel_episodes(out, quick)
    step = None
    if not quick:
        from shiftkit.agent.clients import HFClient
        from shiftkit.agent.episode import AgentConfig, run_episode
        from shiftkit.kernels.fixtures import PROBLEMS
        from shiftkit.models import TinyModelSpec, make_char_tokenizer, make_tiny_model

        tok = make_char_tokenizer()
        tiny = make_tiny_model(TinyModelSpec(hidden_size=32, num_hidden_layers=1, intermediate_size=64, num_attention_heads=2,
                                             num_key_value_heads=1, head_dim=16, max_position_embeddings=8192), seed=0)
        bad = run_episode(PROBLEMS / "scale_shift_clamp.py", HFClient(tiny, tok, temperature=1.0),
                          AgentConfig(max_turns=1, max_tokens_per_turn=24, final_eval="verify"), out / "tiny_episode.jsonl")
        step = kernel_rl_step([events, bad["events"]], tiny, tok, algo="ppo")
    vp = rl.get("value_pretrain", {})
    rep = ["## 5. Kernel agent", "",
           "Toy multi-turn tool task (calculator; tiny 0.23M Qwen3 behaviour-cloned on noisy demonstrations, then PPO with "
           "a value head, GAE gamma=1 lambda=0.95, clip 0.2/0.28, tool-output tokens masked):", "",
           f"- held-out success (sampled) {rl['initial_eval']['success']:.2f} -> {rl['final_eval']['success']:.2f} in {rl['steps']} steps; "
           f"training reward {rl['reward_first']:.2f} -> {rl['reward_last']:.2f} ({t_rl:.0f} s incl. warm start)"]
    if vp:
        rep.append(f"- value pretraining ({vp['steps']} steps): critic MSE vs realised return on held-out rollouts "
                   f"{vp['before']['mse']:.3f} -> {vp['after']['mse']:.3f}")
    c = ep["counts"]
    rep += ["", f"Scripted kernel episode (cpu backend, scale_shift_clamp): outcome {ep['outcome']}, {c['turns']} turns, "
                f"{c['tool_calls']} tool calls (injected compile error observed and fixed), rewards per verify/profile "
                f"{[r['reward'] for r in ep['rewards']]}, final reward {ep['final_reward']:+g}."]
    if step:
        rep.append(f"One agentic PPO step on [scripted, tiny-policy] kernel trajectories (rewards {step['rewards']}): "
                   f"{step['gen_tokens']} generated tokens trained, {step['context_tokens']} context/tool tokens masked, "
                   f"policy loss {step['policy_loss']:.3f}, value loss {step['value_loss']:.3f} (mechanics, not learning).")
    rep.append("")
    return {"toy_rl": {k: rl[k] for k in ("initial_eval", "final_eval", "reward_first", "reward_last", "steps") if k in rl}
            | ({"value_pretrain": {k: vp[k] for k in ("before", "after", "steps")}} if vp else {}),
            "scripted_episode": {k: ep[k] for k in ("outcome", "final_reward", "rewards", "counts", "timings")},
            "kernel_rl_step": step, "seconds": round(time.time() - t0, 1), "report": rep}
