"""Where tfguard hooks into Keras: layer taps, the optimizer's door, the step as a transaction.

The primitives the firewall, the replay and the signals share. They add no
op to a graph unless a guarded step (`StepContext`) or a recording
(`taps.recording`) is active, and they keep the private Keras surface
tfguard touches in one module (`keras_compat`).
"""

from tfguard.hooks import keras_compat, taps
from tfguard.hooks.context import LossSeen, StepContext, Update
from tfguard.hooks.transaction import Transaction

__all__ = ["LossSeen", "StepContext", "Transaction", "Update", "keras_compat", "taps"]
