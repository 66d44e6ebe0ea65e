"""Branch capture: where forward branches on a tensor's value, trace each side and join them
with ``torch.cond``.

A stage of its own above the tracer, which stays one run of forward: ``capture`` runs forward
with every decision taking its first value, then once more for each decision's other value
(keeping the decisions around it as they were), and joins the runs into one graph
(``join.py``) where they part (``align.py``).  Every run starts from the model as the user gave
it and shares one fake mode, so the runs' graphs read the same inputs.  The work is bounded:
past ``max_runs`` runs the export fails, naming the line of the decision that needed one more.
"""

from .capture import BRANCH_MODES, DEFAULT_MAX_RUNS, capture

__all__ = ["BRANCH_MODES", "DEFAULT_MAX_RUNS", "capture"]
