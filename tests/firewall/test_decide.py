"""The decision of a guarded step, alone: flags and a policy in, exact values out, with and without XLA.

`decide` is a pure function of the step's flags and the policy (as optax
tests `apply_if_finite`): which slots failed, whether the update is
rejected, and the NaN/+Inf/-Inf counts of every finiteness flag.
"""

import numpy as np
import pytest
import tensorflow as tf

from tfguard._firewall.stages import Flag, Slot, counted_flag
from tfguard._firewall.step import decide

NAN, INF = float("nan"), float("inf")


def _flags(x, loss, labels_ok, gradient):
    return [
        Flag(Slot("data", "x", "finite"), tensor=x),
        Flag(Slot("data", "y", "labels"), ok=labels_ok),
        Flag(Slot("loss", "loss", "finite"), tensor=loss),
        counted_flag(Slot("gradients", "gradient of 'd/kernel'", "finite"), gradient),
    ]


CASES = {
    # name: (x, loss, labels ok, gradient) -> failed slots, rejected under skip/raise, rejected under warn
    "clean": (([1.0, 2.0], 0.5, True, [0.1, -0.2]), [0, 0, 0, 0], True, False, False),
    "nan_input": (([NAN, 2.0], 0.5, True, [0.1, -0.2]), [1, 0, 0, 0], False, True, False),
    "bad_label": (([1.0, 2.0], 0.5, False, [0.1, -0.2]), [0, 1, 0, 0], False, True, True),
    "inf_loss": (([1.0, 2.0], INF, True, [0.1, -0.2]), [0, 0, 1, 0], False, True, True),
    "nan_gradient": (([1.0, 2.0], 0.5, True, [NAN, 1.0]), [0, 0, 0, 1], False, True, True),
}


def _decide(policy, jit_compile, x, loss, labels_ok, gradient):
    @tf.function(jit_compile=jit_compile)
    def run(x, loss, labels_ok, gradient):
        return decide(_flags(x, loss, labels_ok, gradient), policy)

    return {k: np.asarray(v) for k, v in run(tf.constant(x), tf.constant(loss), tf.constant(labels_ok),
                                              tf.constant(gradient)).items()}


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
@pytest.mark.parametrize("policy", ["raise", "skip", "warn"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_decide_gives_exact_values_for_each_policy(case, policy, jit_compile):
    inputs, failed, clean, rejects, rejects_warned = CASES[case]
    decision = _decide(policy, jit_compile, *inputs)
    assert decision["failures"].tolist() == failed
    rejected = rejects_warned if policy == "warn" else rejects
    assert bool(decision["reject"]) is rejected
    assert float(decision["applied"]) == (0.0 if rejected else 1.0)
    counts = decision["finite_counts"]
    x, loss, _, _ = inputs
    if np.isfinite(x).all() and np.isfinite(loss):  # a good step counts nothing: zeros
        assert counts[:2].tolist() == [[0.0] * 4] * 2
    else:  # one non-finite value makes every held tensor counted exactly
        assert counts[0].tolist() == [float(np.isnan(x).sum()), float(np.isposinf(x).sum()), 0.0, 2.0]
        assert counts[1].tolist() == [float(np.isnan(loss)), float(np.isposinf(loss)), 0.0, 1.0]
    assert counts[2].tolist() == [-1.0, -1.0, -1.0, 2.0]  # judged at the apply by its sum: not counted
    assert clean == (not any(failed))


def test_a_step_without_flags_is_applied():
    decision = decide([Flag(Slot("data", "x", "shape"), ok=tf.constant(True))], "skip")
    assert not bool(decision["reject"]) and "finite_counts" not in decision
