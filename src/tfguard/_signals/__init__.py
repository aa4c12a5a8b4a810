"""The signals of a training step, measured in the graph for the Logger and live diagnosis.

Per-layer probes (`probes`), the tensor statistics they are made of
(`stats`), histograms and their buckets (`histograms`, `buckets`), the one
record per recording step and the bus that hands it to listeners
(`record`), and the time a step waited for its input or the CPU
(`contention`). The guard (`tfguard._firewall`) builds on these; nothing
here decides whether a step is applied.
"""

from tfguard._signals.record import StepRecord

__all__ = ["StepRecord"]
