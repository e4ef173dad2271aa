"""Recipes: runnable studies built on the library, apart from it (the library never imports them).

* :mod:`world`: the toy world (weak and strong tiny models SFT'd on traces with mistakes); ``shiftkit world build``
* :mod:`demo`: the main job end to end, with its report; ``shiftkit demo``
* :mod:`weak_to_strong`: Direct-OPD and baselines on the toy world; ``shiftkit experiment weak-to-strong``
* :mod:`sar_study`: SAR retention, pass@k and merging on the toy world; ``shiftkit experiment sar``
* :mod:`real_w2s`: the weak-to-strong experiment on a real model (SmolLM2-135M-Instruct); ``shiftkit experiment real-w2s``
* :mod:`agent_toy`: the agent's toy tool-task RL study and the demo's agent stage; ``shiftkit experiment agent-toy``
* :mod:`common`: the cached GRPO checkpoints and cached evaluations the recipes share

Only :mod:`shiftkit.cli` imports this package (``tests/test_layering.py`` checks it).
"""
