"""The control-flow fuzzer: random models that branch on tensor values, loop over data-sized
tensors and keep Python state across both, judged against eager on inputs that take every
side (``generator``, ``runner``, ``shrink``; the long run is ``python -m tests.fuzz.flow.run``)."""
