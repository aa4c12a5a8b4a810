"""Claim: the cost of guarding and logging does not grow with the model's depth.

Contenders on the same model shape, each its own instance, interleaved in
one process: plain `fit`; plain `fit` again on a second instance (what two
identical contenders differ by here: the noise floor of every ratio);
`tfguard.guard(policy="skip")`;
`guard(forward="layers")`; `tfguard.Logger()` defaults (scalars every 10
steps, histograms every 100), whose idle steps run its recording trace
until they have spent that trace's first call (rent or buy, `HostLoop.key`:
a run of this length never buys); and the same Logger once the plain
trace is bought, as in a long run. Models (`scale_models.py`): the 100- and
200-layer MLP (Dense(32), a BatchNormalization after every fourth) and
ResNet50 on 64x64x3.

During the rounds, what the first fits left (the traced models) is out of
Python's garbage collector's reach (`gc.freeze`, undone after them): a full
collection over several traced 200-layer models took 0.5-1.9 s and landed
in whichever contender's round it fell (plain's too), where a user's run
holds one model.

Printed per contender: the first `fit` (trace, compile and its steps), the
median ms/step over interleaved rounds of `fit` (each round `--steps` steps,
the same for all) as a ratio to plain's, wall-clock and process CPU time
(on a shared machine the CPU time moves less: time the process waited for
a core is not in it), and the ops of the traced step (the Logger's: its
recording trace) per layer, branch functions included.

`--jit` compiles every contender's step with XLA (`jit_compile=True`),
which is what Keras's `jit_compile="auto"` picks where a GPU is visible:
there the many small ops a guard adds per variable are fused.

`--contenders` picks some of them (plain `fit` always runs); the paired
column is the median over rounds of each round's ratio to plain's round.
Each round starts with the next contender (`rotated`).

`--per-fit` also runs, in each round, a `fit` of half of `--steps` and
prints what a long run meets apart from what each `fit` costs once: a
step's price in a long run (the difference of the two fits per step, as a
ratio to plain's) and the fixed price of one `fit` (a Logger's start and
end: its run directory, hparams, graph and flush; each round's Logger
contenders get a Logger of their own, as every `fit` would). Both fits
must hold whole recording periods (the Logger's histograms come every 100
steps), or the one histogram step a round lands in the same fit every
round and biases the difference: `--steps` must be a multiple of twice
that period (200).

Run: `.venv/bin/python benchmarks/depth.py [--models mlp_deep100,mlp_deep200] [--rounds 7 --steps 100] [--jit]
[--contenders plain,noise,guard,layers,logger,bought] [--per-fit]`
"""

from __future__ import annotations

import argparse
import gc
import inspect
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfguard  # noqa: E402
from scale_models import MODELS  # noqa: E402
from tfguard._firewall.instrument import instrumentation_of  # noqa: E402
from tfguard._signals.record import RECORDING  # noqa: E402

BATCH = {"resnet50": 16}
PERIOD = inspect.signature(tfguard.Logger).parameters["histograms_every"].default
"""The Logger's default histogram period (`histograms_every`, 100): `--per-fit`'s fits hold whole ones."""


def op_count(model: keras.Model, spec, recording: bool = False) -> int:
    """Ops in the traced train step, its branch functions included."""
    inst = instrumentation_of(model)
    if inst is not None and recording:
        inst.tracing_kinds = RECORDING
    try:
        concrete = tf.function(model.train_step, autograph=False).get_concrete_function(spec)
    finally:
        if inst is not None:
            inst.tracing_kinds = frozenset()
    ops = len(concrete.graph.get_operations())
    for function in concrete.graph._functions.values():
        ops += len(function.cached_definition.node_def)
    return ops


def _jit(build):
    """`build`, its model's step compiled by XLA (Keras's default where a GPU is visible)."""
    def built():
        model = build()
        model.jit_compile = True
        return model
    return built


def _buy_now(model: keras.Model) -> None:
    """The model's next idle step traces the plain step: where a long run's rent ends."""
    instrumentation_of(model)._host.rent_before_buying = 0.0


class Contender:
    def __init__(self, name: str, build, attach=None, callbacks=None, after_first=None):
        self.name = name
        self.model = build()
        if attach is not None:
            attach(self.model)
        self.callbacks = callbacks or (lambda: [])
        self.after_first = after_first
        self.times: list[float] = []
        self.cpu_times: list[float] = []
        self.short_cpu_times: list[float] = []  # `--per-fit`: each round's short fit, process CPU seconds
        self.long_cpu_times: list[float] = []  # and the same round's long one
        self.first = 0.0

    def fit(self, data, steps: int) -> tuple[float, float]:
        """Runs one `fit` of `steps` steps; returns its wall-clock and process CPU seconds."""
        start, cpu = time.perf_counter(), time.process_time()
        self.model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=self.callbacks())
        return time.perf_counter() - start, time.process_time() - cpu


CONTENDERS = ("plain", "noise", "guard", "layers", "logger", "bought")
"""The `--contenders` keys, in the order they run: plain `fit` (always first, the baseline), a second plain
model, the guard, the every-layer guard, the Logger renting, the Logger with the plain trace bought."""


def contenders_of(keys: list[str], build, logdir: str) -> list[Contender]:
    """The contenders named by `keys` (plain `fit` first, whether named or not)."""
    made = {
        "plain": lambda: Contender("plain fit", build),
        "noise": lambda: Contender("plain fit, a second model (the noise)", build),
        "guard": lambda: Contender("guard", build, lambda m: tfguard.guard(m, policy="skip", quarantine_dir=None)),
        "layers": lambda: Contender("guard(forward='layers')", build,
                                    lambda m: tfguard.guard(m, policy="skip", forward="layers", quarantine_dir=None)),
        "logger": lambda: Contender("Logger()", build, callbacks=lambda: [tfguard.Logger(logdir)]),
        "bought": lambda: Contender("Logger(), the plain trace bought (a long run)", build,
                                    callbacks=lambda: [tfguard.Logger(logdir)], after_first=_buy_now),
    }
    return [made[key]() for key in CONTENDERS if key == "plain" or key in keys]


def rotated(contenders: list, round_: int) -> list:
    """The order of round `round_`: each contender runs first in turn (a fixed order gives the first
    one of a round its own share of the machine's slow spells).

    >>> rotated(["a", "b", "c"], 0), rotated(["a", "b", "c"], 4)
    (['a', 'b', 'c'], ['b', 'c', 'a'])
    """
    shift = round_ % len(contenders)
    return contenders[shift:] + contenders[:shift]


def per_fit(contender: Contender, plain: Contender, short: int, long: int) -> tuple[float, float, float]:
    """From `--per-fit` rounds: a step's CPU ms in a long run, its ratio to plain's, and one `fit`'s fixed CPU ms.

    Each round ran a fit of `short` steps and one of `long`: their
    difference per step is the price of a step, whatever a `fit` costs once.

    >>> c, p = Contender.__new__(Contender), Contender.__new__(Contender)
    >>> c.short_cpu_times, c.long_cpu_times = [0.3], [0.9]
    >>> p.short_cpu_times, p.long_cpu_times = [0.2], [0.5]
    >>> [round(v, 3) for v in per_fit(c, p, 10, 40)]
    [20.0, 2.0, 100.0]
    """
    def step(c):
        return statistics.median((b - a) / (long - short) for a, b in zip(c.short_cpu_times, c.long_cpu_times))

    mine = step(contender)
    fixed = statistics.median(contender.short_cpu_times) - mine * short
    return mine * 1000, mine / step(plain), fixed * 1000


def measure(model_name: str, rounds: int, steps: int, first_steps: int, jit: bool = False,
            keys: tuple[str, ...] = CONTENDERS, fit_price: bool = False) -> None:
    batch = BATCH.get(model_name, 64)
    build = MODELS[model_name]
    if jit:
        build = _jit(build)
    contenders = contenders_of(list(keys), build, tempfile.mkdtemp(prefix="tfguard-depth-"))
    model = contenders[0].model
    shape = tuple(model.inputs[0].shape[1:])
    classes = model.outputs[0].shape[-1]
    x = tf.random.stateless_uniform((batch * 8, *shape), seed=(1, 2))
    y = tf.random.stateless_uniform((batch * 8,), seed=(3, 4), maxval=classes, dtype=tf.int32)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch, drop_remainder=True).repeat()
    layers = len(model.layers)
    xla = ", XLA (jit_compile=True)" if jit else ""
    print(f"\n{model_name}: {model.count_params() / 1e6:.2f} M params, {layers} layers, batch {batch}{xla}", flush=True)
    for c in contenders:
        c.first, _ = c.fit(data, first_steps)
        if c.after_first is not None:
            c.after_first(c.model)
    gc.collect()
    gc.freeze()  # the traced models stay: later collections scan only what the rounds make
    short = steps // 2
    for round_ in range(rounds):
        for c in rotated(contenders, round_):
            wall, cpu = c.fit(data, steps)
            c.times.append(wall / steps)
            c.cpu_times.append(cpu / steps)
            if fit_price:
                c.long_cpu_times.append(cpu)
                c.short_cpu_times.append(c.fit(data, short)[1])
    gc.unfreeze()  # this model's contenders can go once measured (`--models` measures the next in this process)
    spec = (tf.TensorSpec([None, *shape], tf.float32), tf.TensorSpec([None], tf.int32))
    plain, plain_cpu = statistics.median(contenders[0].times), statistics.median(contenders[0].cpu_times)
    print("| contender | ms/step | × plain | CPU ms/step | × plain | paired CPU × plain | first fit s | × plain | ops/layer |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in contenders:
        median, cpu = statistics.median(c.times), statistics.median(c.cpu_times)
        paired = statistics.median(mine / base for mine, base in zip(c.cpu_times, contenders[0].cpu_times))
        ops = op_count(c.model, spec, recording=c.name.startswith("Logger"))
        print(f"| {c.name} | {median * 1000:.2f} | {median / plain:.3f} | {cpu * 1000:.2f} | {cpu / plain_cpu:.3f} | "
              f"{paired:.3f} | {c.first:.1f} | {c.first / contenders[0].first:.2f} | {ops / layers:.1f} |", flush=True)
    if fit_price:
        print(f"\nA long run (fits of {short} and {steps} steps each round, process CPU time):")
        print("| contender | CPU ms a step | × plain | CPU ms once per fit |")
        print("|---|---|---|---|")
        for c in contenders:
            ms, ratio, fixed = per_fit(c, contenders[0], short, steps)
            print(f"| {c.name} | {ms:.2f} | {ratio:.3f} | {fixed:.0f} |", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp_deep100,mlp_deep200")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--first-steps", type=int, default=10)
    parser.add_argument("--jit", action="store_true",
                        help="compile every contender's step with XLA, as Keras does by default on a GPU")
    parser.add_argument("--contenders", default=",".join(CONTENDERS),
                        help=f"which to run, of {','.join(CONTENDERS)} (plain always runs: the baseline)")
    parser.add_argument("--per-fit", action="store_true",
                        help=f"also a fit of half of --steps each round (--steps a multiple of {2 * PERIOD}): a step's price in a long run, and a fit's")
    parser.add_argument("--threads", type=int, default=1,
                        help="TensorFlow intra/inter-op threads (0: TensorFlow's default)")
    args = parser.parse_args(argv)
    keys = tuple(args.contenders.split(","))
    unknown = sorted(set(keys) - set(CONTENDERS))
    if unknown:
        parser.error(f"--contenders: unknown {', '.join(unknown)}; expected some of {','.join(CONTENDERS)}")
    if args.per_fit and (args.steps < PERIOD * 2 or args.steps % (PERIOD * 2)):
        parser.error(f"--per-fit needs --steps a multiple of {PERIOD * 2}: its fits of --steps and half of it must each "
                     f"hold whole recording periods (histograms every {PERIOD} steps); received --steps {args.steps}")
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    for name in args.models.split(","):
        measure(name, args.rounds, args.steps, args.first_steps, jit=args.jit, keys=keys, fit_price=args.per_fit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
