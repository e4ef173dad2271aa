"""The kernel agent (CUDA Agent, arXiv 2602.24286): a ReAct loop with tools and a SKILL.md per backend
(:mod:`episode`, :mod:`tools`, :mod:`workspace`), model clients (OpenAI-compatible HTTP, in-process HF,
scripted; :mod:`clients`), a minimal OpenAI-compatible server (:mod:`server`), JSONL trajectories with a
schema (:mod:`trajectory`), the benchmark (:mod:`bench`), task synthesis (:mod:`synth`) and agentic RL
(:mod:`chat`, :mod:`rft`, :mod:`toytask`, :mod:`rl` with its :mod:`critic`; the RL math is in :mod:`shiftkit.losses`
and :mod:`shiftkit.advantages`). Commands: ``shiftkit agent run|bench|serve|rft|synth|train``.

See docs/agent.md.
"""
