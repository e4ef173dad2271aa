from shiftkit.tasks.arith import ArithTask, Mixture, eval_set, extract_final_answer, get_task, split_of
from shiftkit.tasks.base import Problem, Task

__all__ = ["ArithTask", "Mixture", "Problem", "Task", "eval_set", "extract_final_answer", "get_task", "split_of"]
