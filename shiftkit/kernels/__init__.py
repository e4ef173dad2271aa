"""Kernel environment: compile, verify and profile candidate kernels for a reward you can trust by construction.

    from shiftkit.kernels import evaluate, load_problem, load_solution, EvalConfig
    res = evaluate(load_problem("p.py"), load_solution("s.py"), EvalConfig(profile=False))

See docs/kernels.md for the threat model, the protocol, the findings and measured numbers.
"""

from shiftkit.kernels.evaluate import EvalConfig, Result, compile_only, evaluate
from shiftkit.kernels.findings import CODES, Finding
from shiftkit.kernels.problem import KernelProblem, Problem, load_problem
from shiftkit.kernels.solution import Solution, load_solution

__all__ = ["evaluate", "compile_only", "EvalConfig", "Result", "load_problem", "load_solution", "KernelProblem",
           "Problem", "Solution", "Finding", "CODES"]
