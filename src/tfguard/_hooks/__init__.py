"""Where tfguard hooks into Keras: layer taps, the interception of the optimizer's apply, the step as a transaction.

The primitives the firewall, the replay and the signals share. They add no
op to a graph unless a step's context (`StepContext`) or a recording
(`taps.recording`) is active. The interception of the optimizer's apply hands each update to
the active context's `intercept_apply`: a `StepContext` records it and lets
it through; the firewall's `FirewallContext` overrides `intercept_apply`
(`tfguard._firewall.apply_interception`). A cond whose branch rarely runs is the caller's
`tf.cond`, kept functional here (`functional_cond.keep_cond_functional`), and the dry run of an
update is a generator its caller drives (`dry_run.runs`). The private Keras surface tfguard touches is in one module (`keras_compat`),
the private TensorFlow surface in another (`tf_compat`), and whether a
function is one tfguard installed is `installed`.
"""

from tfguard._hooks import keras_compat, taps
from tfguard._hooks.context import LossSeen, StepContext, Update
from tfguard._hooks.transaction import Transaction

__all__ = ["LossSeen", "StepContext", "Transaction", "Update", "keras_compat", "taps"]
