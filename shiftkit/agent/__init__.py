"""The kernel agent (CUDA Agent, arXiv 2602.24286, issue #6): a ReAct loop with tools and a SKILL.md per
backend (:mod:`episode`, :mod:`tools`, :mod:`workspace`), model clients (OpenAI-compatible HTTP, in-process
HF, scripted; :mod:`clients`), a minimal OpenAI-compatible server (:mod:`server`), JSONL trajectories with a
schema (:mod:`trajectory`), the benchmark (:mod:`bench`) and agentic RL (:mod:`losses`, :mod:`chat`,
:mod:`rft`, :mod:`toytask`, :mod:`agentic_rl`). Task synthesis lives in :mod:`shiftkit.kernels.synth`.

See docs/agent.md.
"""
