"""The adversarial tier shares tests/kernels/conftest.py (one build cache, the background torch-binding build)."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_kernels_conftest", Path(__file__).parents[1] / "kernels" / "conftest.py")
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
torch_binding_build = _mod.torch_binding_build
