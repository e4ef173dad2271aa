"""``agent train task=kernels`` on the REAL in-process kernel environment (``kernel_mode=verify``) under
whatever the launcher asked for, for tests/scale/test_fsdp_loops.py: 1 process, or 2 ranks (each rank its
own environment: its own zygote, sandboxes and cgroups, judging its share of the episode groups). The tiny
policy cannot call tools, so each turn's sampled text is replaced, after it was sampled and tokenised, by a
write_file call of the correct or a wrong solution chosen by the text's parity (as
tests/agent/test_kernel_rl.py does in one process).

    python tests/scale/kernels_agent_script.py OUT MODEL_DIR DATA_JSONL
"""

import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "shiftkit/kernels/fixtures"
CORRECT = (FIX / "solutions/scale_shift_clamp/correct.py").read_text()
WRONG = CORRECT.replace("1.f ? 1.f : v", "0.5f ? 0.5f : v").replace('name="scale_shift_clamp"', 'name="ssc_wrong"')


def main() -> None:
    out, model, data = sys.argv[1:4]
    torch.set_num_threads(1)
    import shiftkit.agent.kernel_task as KT
    from shiftkit.agent.rl import AgenticRLConfig, run_agentic_rl

    KT.parse_tool_calls = lambda text, id_fn: ("", [{"id": id_fn(), "type": "function", "function": {
        "name": "write_file", "arguments": json.dumps({"path": "model_new.py", "content": CORRECT if sum(
            map(ord, text)) % 2 else WRONG})}}], [])
    cfg = AgenticRLConfig(task="kernels", model=model, data=data, eval_data=data, out=out, actions="tools",
                          skill_in_prompt=False, tools=["write_file", "finish"], kernel_mode="verify",
                          kernel_config={"trials": 2, "secret_seed": 3}, steps=2, prompts_per_step=2, group_size=2,
                          max_turns=1, max_new_tokens=6, eval_n=2, eval_every=0, value_pretrain_steps=1,
                          value_pretrain_batches=1, token_budget=1500, save_every=0, lr=1e-2, threads=1)
    run_agentic_rl(cfg)


if __name__ == "__main__":
    main()
