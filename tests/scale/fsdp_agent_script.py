"""The agentic RL loop (PPO with its critic, or GRPO) under whatever the launcher asked for, for
tests/scale/test_fsdp_loops.py: 1 process, or ``accelerate launch --config_file
configs/accelerate/fsdp_cpu_gloo.yaml`` (the policy and the critic sharded with FSDP2, each rank a strided
share of the prompt groups). The tiny warm policy never solves the toy task, so the reward is the
parity of what it wrote (as tests/agent/test_agent_rl.py's ``varied_reward``): groups have signal and
the critic has targets.

    python tests/scale/fsdp_agent_script.py OUT WARM_DIR ALGO
"""

import sys

import torch


def main() -> None:
    out, warm, algo = sys.argv[1:4]
    torch.set_num_threads(1)
    from shiftkit.agent import toytask as TT
    from shiftkit.agent.rl import AgenticRLConfig, run_agentic_rl

    TT.ToyEpisode.reward = property(lambda self: float(len("".join(self.turns)) % 2))
    cfg = AgenticRLConfig(out=out, warm_dir=warm, algo=algo, steps=2, warm_steps=20, value_pretrain_steps=2,
                          value_pretrain_batches=1, eval_n=2, eval_every=0, prompts_per_step=4, group_size=2,
                          max_turns=2, max_new_tokens=8, token_budget=60, save_every=1, lr=1e-2)
    run_agentic_rl(cfg)


if __name__ == "__main__":
    main()
