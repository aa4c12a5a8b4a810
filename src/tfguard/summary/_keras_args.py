"""The arguments of `keras.callbacks.TensorBoard`, as `tfguard.Logger` honours them.

Replacing `keras.callbacks.TensorBoard(...)` by `tfguard.Logger(...)` is a
one-word change: the Logger takes the same arguments with the same meaning,
and writes more.

| argument | in the Logger |
|---|---|
| `log_dir` | the log root (alias of `logdir`) |
| `histogram_freq` | weight histograms (and, with `write_images`, weight images) at every N-th epoch end, at the epoch's last step, as Keras does; `0` turns every histogram off; gradient and activation histograms keep the step schedule |
| `write_graph` | the model's conceptual graph (TensorBoard's Graphs tab), as Keras writes it |
| `write_images` | weights as images at the histogram epochs, as Keras does |
| `write_steps_per_second` | always written (`perf/steps_per_second`) |
| `update_freq` | `"batch"`: batch values every step; an integer N: every N steps; `"epoch"`: the default schedule (the Logger writes batch values Keras would not) |
| `profile_batch` | the batches `tf.profiler` traces (an int, a pair or `"start,stop"`), into the run's `plugins/profile` |
| `embeddings_freq` | every `Embedding` table to the projector at every N-th epoch end (and, by default, at the end of training) |
| `embeddings_metadata` | a labels file per embedding layer name (or one for all) |

Example:

>>> args = KerasArguments.parse(histogram_freq=2, update_freq="batch", profile_batch="3,5")
>>> args.histogram_freq, args.scalars_every(10), args.profile_batch
(2, 1, (3, 5))
"""

from __future__ import annotations

import dataclasses

from tfguard._errors import ContractError

UPDATE_FREQS = ("batch", "epoch")


def _profile_batch(value) -> tuple[int, int] | None:
    """`(start, stop)` (1-based, inclusive, as Keras counts) or `None` for no profiling."""
    if value in (None, 0, "0", False):
        return None
    try:
        if isinstance(value, str):
            parts = [int(p) for p in value.split(",")]
        elif isinstance(value, (tuple, list)):
            parts = [int(p) for p in value]
        else:
            parts = [int(value)]
    except (TypeError, ValueError):
        parts = []
    if len(parts) == 1:
        parts = parts * 2
    if len(parts) != 2 or parts[0] < 1 or parts[1] < parts[0]:
        raise ContractError(
            "Received an invalid value for `profile_batch`, expected a positive integer, a pair "
            f"(start, stop) with 0 < start <= stop, or 'start,stop'. Received: profile_batch={value!r}"
        )
    return parts[0], parts[1]


def _freq(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ContractError(f"Received an invalid value for `{name}`, expected an integer >= 0. "
                            f"Received: {name}={value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class KerasArguments:
    """`keras.callbacks.TensorBoard`'s arguments, checked (see the module docstring)."""

    histogram_freq: int | None = None  # None: not given (the Logger's own schedule)
    write_graph: bool = True
    write_images: bool = False
    write_steps_per_second: bool = False
    update_freq: str | int = "epoch"
    profile_batch: tuple[int, int] | None = None
    embeddings_freq: int = 0
    embeddings_metadata: object = None

    @classmethod
    def parse(cls, *, histogram_freq=None, write_graph=True, write_images=False,
              write_steps_per_second=False, update_freq="epoch", profile_batch=0,
              embeddings_freq=0, embeddings_metadata=None) -> KerasArguments:
        """Checks the arguments as `keras.callbacks.TensorBoard` takes them.

        Raises:
            ContractError: for a value Keras would not take.
        """
        if histogram_freq is not None:
            histogram_freq = _freq("histogram_freq", histogram_freq)
        if not (update_freq in UPDATE_FREQS or (isinstance(update_freq, int)
                                                and not isinstance(update_freq, bool)
                                                and update_freq > 0)):
            raise ContractError("Received an invalid value for `update_freq`, expected 'batch', "
                                f"'epoch' or a positive integer. Received: update_freq={update_freq!r}")
        if embeddings_metadata is not None and not isinstance(embeddings_metadata, (str, dict)):
            raise ContractError("Received an invalid value for `embeddings_metadata`, expected a file "
                                "name or a dict layer name -> file name. "
                                f"Received: {type(embeddings_metadata).__name__}")
        return cls(histogram_freq=histogram_freq, write_graph=bool(write_graph),
                   write_images=bool(write_images),
                   write_steps_per_second=bool(write_steps_per_second), update_freq=update_freq,
                   profile_batch=_profile_batch(profile_batch),
                   embeddings_freq=_freq("embeddings_freq", embeddings_freq),
                   embeddings_metadata=embeddings_metadata)

    def scalars_every(self, default: int) -> int:
        """The Logger's `scalars_every` for `update_freq`: 1 for "batch", N for an int, else `default`."""
        if self.update_freq == "batch":
            return 1
        if isinstance(self.update_freq, int):
            return self.update_freq
        return default

    def epoch_histograms(self, epoch: int) -> bool:
        """Whether Keras would write weight histograms at the end of `epoch` (0-based)."""
        return bool(self.histogram_freq) and epoch % self.histogram_freq == 0

    def epoch_embeddings(self, epoch: int) -> bool:
        """Whether Keras would write the embeddings at the end of `epoch` (0-based)."""
        return bool(self.embeddings_freq) and epoch % self.embeddings_freq == 0


__all__ = ["KerasArguments"]
