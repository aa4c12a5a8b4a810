"""Claim: the spike stage skips no healthy step at its defaults, and catches injected spikes.

Two measurements, each beside OLMo-core's published rule (`SkipStepOptimizer`:
skip when the loss or the gradient norm exceeds mean + 6 std of the last
128 steps, once 64 are held; its window takes every step's values, spikes
and skipped steps included) run on the very same loss and gradient-norm
traces:

1. **False skips on healthy programs**: the healthy programs users bring
   (`tests/diagnose/user_programs.py`: an iris MLP, token ids into an
   `Embedding`, dict inputs normalized in the model, a custom `train_step`,
   a GAN with two optimizers, `fit` in a loop, a `PyDataset` CNN, mixed
   precision) and the diagnosis's healthy programs (`tests/diagnose/
   programs.py`: digits MLP and CNN, moons, regression), each trained as
   written under `guard(model, policy="skip", spikes=True)`. Every spike
   flagged on them is a false skip. Beside them, two wider healthy sets the
   stage was not developed on: the array programs' batches laid out as in
   2. without any injection (`--reshuffled` seeds: the clean twins of the
   injected runs), and the 13 healthy setups of
   `benchmarks/diagnosis_false_alarms.py` (`--sweep` seeds; digits, moons,
   breast cancer and regression under Adam, SGD with momentum, RMSprop;
   `fit` as written there, shuffled, partial last batches).
2. **Detection of injected spikes**: the array programs again, their batches
   laid out in advance, with bad batches injected after the warm-up at
   random places: *corrupted* (two rows scaled by 100 with a wrong label)
   and *mislabelled* (half the rows with a wrong label: a shard labelled
   wrong). A spike is detected when its batch is rejected; a missed one is
   listed with how far its loss and gradient norm lay above the clean
   window (in standard deviations), so a bad batch that made no spike (a
   `tanh` network saturates: its loss stays bounded) shows as such.

The traces are taken from the guarded step's own outputs (`spike`: the
value of each signal at every step, before the decision). OLMo-core's rule
is replayed on them offline; where tfguard skipped a batch, OLMo-core's
optimizer is assumed to have skipped it too (it did, when it flagged it).

Run: `.venv/bin/python benchmarks/spike_detection.py [--seeds 2 --reshuffled 5 --sweep 1 --quick]`
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the programs the tests train (`tests.diagnose`)
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the healthy setups of `diagnosis_false_alarms.py`

import keras  # noqa: E402
import numpy as np  # noqa: E402
from tests.diagnose import programs as P  # noqa: E402
from tests.diagnose import user_programs as U  # noqa: E402

import diagnosis_false_alarms as F  # noqa: E402
import tfguard  # noqa: E402
from tfguard._firewall import host, spikes  # noqa: E402
from tfguard._firewall.step import OUTPUT_KEY  # noqa: E402

ARRAY_PROGRAMS = {"digits_mlp": P.healthy_digits, "digits_cnn": P.healthy_cnn_rescaling,
                  "moons_tanh": P.healthy_moons, "regression_mlp": P.healthy_regression}


class Traces:
    """Every guarded step's spike signals, read off the step's outputs (`HostLoop.after_step`, wrapped)."""

    def __init__(self):
        self.runs: list[dict] = []
        self._original = host.HostLoop.after_step

    def start(self, name: str) -> None:
        self.runs.append({"name": name, "values": {}, "steps": 0})

    def __enter__(self):
        traces = self

        def after_step(self, data, logs, kinds, start, input_wait=None):
            table = logs.get(OUTPUT_KEY, {}).get(spikes.TABLE)
            run = traces.runs[-1]
            if table is not None:
                names = [s.where for s in self.inst.plan.slots if s.stage == spikes.STAGE]
                for name, row in zip(names, np.asarray(table)):
                    run["values"].setdefault(name, {})[run["steps"]] = float(row[0])
            run["steps"] += 1
            return traces._original(self, data, logs, kinds, start, input_wait)

        host.HostLoop.after_step = after_step
        return self

    def __exit__(self, *exc):
        host.HostLoop.after_step = self._original


def olmo_flags(run: dict, window=128, sigmas=6.0) -> set[int]:
    """The steps OLMo-core's `SkipStepOptimizer.get_step_factor` skips, on a run's traces.

    Its lists take every step's value (`latest_loss` is set before each
    step) and keep the last `window + 1`; it acts once they hold
    `max(2, window // 2)` values, comparing the last with the mean and std
    (`torch.std_mean`, unbiased) of the ones before it. Steps a signal does
    not exist at (no gradient) are left out of that signal's list.
    """
    flagged: set[int] = set()
    for values in run["values"].values():
        steps = sorted(values)
        series = np.asarray([values[s] for s in steps], np.float64)
        for i, step in enumerate(steps):
            held = series[max(0, i - window):i + 1]
            if len(held) < max(2, window // 2):
                continue
            before = held[:-1]
            mean, std = before.mean(), before.std(ddof=1)
            if not (held[-1] - mean <= sigmas * std):  # NaN compares false: the step is skipped
                flagged.add(step)
    return flagged


def guarded_fit(model, **fit):
    """`fit` under `guard(model, policy="skip", spikes=True)`; returns the batches the spike stage rejected."""
    tfguard.guard(model, policy="skip", spikes=True, quarantine_dir=None, max_consecutive_skips=10**6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(verbose=0, **fit)
    return {e.batch for e in tfguard.guard_events(model) if e.stage == spikes.STAGE}


def healthy_user_program(program, traces: Traces) -> tuple[set, list]:
    """Runs a user program as written, every model it fits guarded with spikes; its spikes and runs."""
    original = keras.Model.fit
    flagged, runs = set(), []

    def fit(self, *args, **kwargs):
        if tfguard._firewall.instrumentation_of(self) is None or tfguard._firewall.instrumentation_of(self).guard is None:
            tfguard.guard(self, policy="skip", spikes=True, quarantine_dir=None, max_consecutive_skips=10**6)
        return original(self, *args, **kwargs)

    keras.Model.fit = fit
    traces.start(program.name)
    try:
        namespace = {"__name__": "__main__"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(program.source(), program.name, "exec"), namespace)
    finally:
        keras.Model.fit = original
    for value in namespace.values():
        if isinstance(value, keras.Model):
            flagged |= {e.batch for e in tfguard.guard_events(value) if e.stage == spikes.STAGE}
    runs.append(traces.runs[-1])
    return flagged, runs


def healthy_setup(config, seed: int, traces: Traces) -> tuple[set, dict]:
    """One healthy setup of `diagnosis_false_alarms.CONFIGS`, fitted as written there, guarded with spikes."""
    name, data, build, units, act, loss, optimizer, epochs, batch = config
    keras.utils.set_random_seed(seed)
    (x, y), val = data()
    model = build(x.shape[1], units, act)
    model.compile(optimizer=optimizer(), loss=loss, metrics=["accuracy"] if loss != "mse" else ["mae"])
    traces.start(f"{name} #{seed}")
    flagged = guarded_fit(model, x=x, y=y, validation_data=val, epochs=epochs, batch_size=batch)
    return flagged, traces.runs[-1]


def _clean_window(values: dict, step: int, skipped: set, window: int) -> np.ndarray:
    return np.asarray([values[s] for s in sorted(values) if s < step and s not in skipped][-window:])


def sigmas_above(run: dict, step: int, skipped: set, window=128) -> dict[str, float]:
    """How many standard deviations each signal of `step` lay above the clean window before it."""
    out = {}
    for name, values in run["values"].items():
        before = _clean_window(values, step, skipped, window)
        if step in values and len(before) > 1:
            out[name] = float((values[step] - before.mean()) / before.std(ddof=1))
    return out


SPIKE_FACTOR = 2.0
"""A bad batch is a spike when its loss or gradient norm is at least this many times the largest of the window."""


def is_spike(run: dict, step: int, skipped: set, window=128) -> bool:
    """Whether the loss or gradient norm of `step` is `SPIKE_FACTOR` times the largest of the clean window before it.

    A definition of a spike neither rule uses (no mean, no std): a jump no
    healthy step of the window came near. Megatron-LM's `RerunStateMachine`
    calls a loss spiky at 10 times the largest seen; this asks for twice.
    """
    for values in run["values"].values():
        before = _clean_window(values, step, skipped, window)
        if step in values and len(before) and values[step] >= SPIKE_FACTOR * before.max():
            return True
    return False


def stream(fit: dict, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The program's epochs laid out as one stream of batches (each epoch shuffled); and its batch size."""
    rng = np.random.default_rng(seed)
    x, y, batch = np.asarray(fit["x"]), np.asarray(fit["y"]), int(fit["batch_size"])
    per_epoch = len(x) // batch * batch
    orders = [rng.permutation(len(x))[:per_epoch] for _ in range(int(fit["epochs"]))]
    order = np.concatenate(orders)
    return x[order].copy(), y[order].copy(), batch


def wrong_labels(y: np.ndarray, rows: np.ndarray, rng) -> None:
    """Gives `rows` another label: another class, or for a regression or binary target a far one."""
    if y.dtype.kind in "iu":
        classes = int(y.max()) + 1
        y[rows] = (y[rows] + rng.integers(1, classes, len(rows))) % classes
    elif set(np.unique(y)) <= {0.0, 1.0}:
        y[rows] = 1.0 - y[rows]
    else:
        y[rows] = -y[rows] + np.sign(-y[rows] + 1e-9) * 5.0


def inject(x, y, batch, seed, count, warmup) -> dict[int, str]:
    """Spoils `count` batches after `warmup` (and apart): corrupted or mislabelled. Returns batch -> kind."""
    rng = np.random.default_rng(1000 + seed)
    batches = len(x) // batch
    places = sorted(rng.choice(np.arange(warmup + 10, batches, 7), size=count, replace=False))
    kinds = {}
    for i, b in enumerate(places):
        rows = np.arange(b * batch, (b + 1) * batch)
        if i % 2 == 0:
            bad = rng.choice(rows, 2, replace=False)
            x[bad] = x[bad] * 100.0
            wrong_labels(y, bad, rng)
            kinds[int(b)] = "corrupted"
        else:
            wrong_labels(y, rng.choice(rows, batch // 2, replace=False), rng)
            kinds[int(b)] = "mislabelled"
    return kinds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2, help="seeds of the injected runs")
    parser.add_argument("--count", type=int, default=6, help="spikes injected per run")
    parser.add_argument("--reshuffled", type=int, default=5,
                        help="seeds of the array programs' batches laid out as in 2., nothing injected")
    parser.add_argument("--sweep", type=int, default=1, help="seeds of diagnosis_false_alarms.py's 13 healthy setups")
    parser.add_argument("--quick", action="store_true", help="array programs only for the healthy half")
    args = parser.parse_args(argv)
    config = spikes.SpikeConfig()
    began = time.perf_counter()
    healthy, injected = [], []
    with Traces() as traces:
        for name, build in ARRAY_PROGRAMS.items():
            keras.utils.set_random_seed(0)
            model, fit, _, _ = build()
            traces.start(name)
            flagged = guarded_fit(model, **fit)
            healthy.append(("as written", name, flagged, olmo_flags(traces.runs[-1]), traces.runs[-1]))
        if not args.quick:
            for program in U.HEALTHY:
                flagged, runs = healthy_user_program(program, traces)
                healthy.append(("as written", program.name, flagged, set().union(*(olmo_flags(r) for r in runs)),
                                runs[-1]))
        for seed in range(args.reshuffled):
            for name, build in ARRAY_PROGRAMS.items():
                keras.utils.set_random_seed(seed)
                model, fit, _, _ = build()
                x, y, batch = stream(fit, seed)
                traces.start(f"{name} #{seed}")
                flagged = guarded_fit(model, x=x, y=y, batch_size=batch, epochs=1, shuffle=False)
                healthy.append(("reshuffled", f"{name} #{seed}", flagged, olmo_flags(traces.runs[-1]), traces.runs[-1]))
        for seed in range(args.sweep):
            for setup in F.CONFIGS:
                flagged, run = healthy_setup(setup, seed, traces)
                healthy.append(("sweep", run["name"], flagged, olmo_flags(run), run))
        for seed in range(args.seeds):
            for name, build in ARRAY_PROGRAMS.items():
                keras.utils.set_random_seed(seed)
                model, fit, _, _ = build()
                x, y, batch = stream(fit, seed)
                kinds = inject(x, y, batch, seed, args.count, config.warmup)
                traces.start(f"{name} #{seed}")
                flagged = guarded_fit(model, x=x, y=y, batch_size=batch, epochs=1, shuffle=False)
                run = traces.runs[-1]
                missed = {b: sigmas_above(run, b, flagged) for b in kinds if b not in flagged}
                spiked = {b for b in kinds if is_spike(run, b, flagged - {b})}
                injected.append((f"{name} #{seed}", kinds, flagged, olmo_flags(run), missed, spiked))
    print(f"spike detection: defaults {config}, {time.perf_counter() - began:.0f}s, "
          f"TF {__import__('tensorflow').__version__}, Keras {keras.__version__}")
    print("\n1. false skips on healthy programs (every flagged step is one; its signals in std above the clean window)")
    print(f"{'set':11s} {'program':30s} {'steps':>6s} {'tfguard':>8s} {'OLMo-core rule':>15s}")
    for group, name, ours, theirs, run in healthy:
        print(f"{group:11s} {name:30s} {run['steps']:6d} {len(ours):8d} {len(theirs):15d}")
        for b in sorted(ours):
            said = ", ".join(f"{k} {v:+.1f} std" for k, v in sigmas_above(run, b, ours - {b}).items())
            print(f"    skipped step {b}: {said}")
    for group in dict.fromkeys(g for g, *_ in healthy):
        rows = [h for h in healthy if h[0] == group]
        print(f"{group:11s} {'total (' + str(len(rows)) + ' runs)':30s} {sum(h[4]['steps'] for h in rows):6d} "
              f"{sum(len(h[2]) for h in rows):8d} {sum(len(h[3]) for h in rows):15d}")
    total = (sum(len(h[2]) for h in healthy if h[0] == "as written"),
             sum(len(h[3]) for h in healthy if h[0] == "as written"))
    print(f"\n2. injected bad batches (caught / injected; a spike: its loss or gradient norm at least "
          f"{SPIKE_FACTOR:g}x the largest of the clean window; false: other steps skipped)")
    print(f"{'run':22s} {'bad':>4s} {'spikes':>6s} {'tfguard':>8s} {'of spikes':>9s} {'false':>6s} "
          f"{'OLMo-core rule':>15s} {'of spikes':>9s} {'false':>6s}")
    sums = np.zeros(8, int)
    by_kind: dict[str, np.ndarray] = {}
    for name, kinds, ours, theirs, missed, spiked in injected:
        bad = set(kinds)
        row = [len(bad), len(spiked), len(bad & ours), len(spiked & ours), len(ours - bad),
               len(bad & theirs), len(spiked & theirs), len(theirs - bad)]
        sums += row
        for b, kind in kinds.items():
            by_kind.setdefault(kind, np.zeros(4, int))
            by_kind[kind] += [1, b in spiked, b in ours, b in theirs]
        print(f"{name:22s} {row[0]:4d} {row[1]:6d} {row[2]:8d} {row[3]:9d} {row[4]:6d} {row[5]:15d} {row[6]:9d} "
              f"{row[7]:6d}")
        for b, above in missed.items():
            said = ", ".join(f"{k} {v:+.1f} std" for k, v in above.items())
            print(f"    missed batch {b} ({kinds[b]}{', a spike' if b in spiked else ', no spike'}): {said}")
        for b in sorted(ours - bad):
            print(f"    skipped batch {b}, not injected ({b - max([k for k in bad if k < b], default=-1)} "
                  "after the last bad batch)")
    print(f"{'total':22s} " + " ".join(f"{v:{w}d}" for v, w in zip(sums, (4, 6, 8, 9, 6, 15, 9, 6))))
    print(f"caught, of the spikes: tfguard {100 * sums[3] / max(sums[1], 1):.1f}%, OLMo-core rule "
          f"{100 * sums[6] / max(sums[1], 1):.1f}%; of every bad batch: tfguard {100 * sums[2] / max(sums[0], 1):.1f}%, "
          f"OLMo-core rule {100 * sums[5] / max(sums[0], 1):.1f}%")
    for kind, (n, spiking, ours, theirs) in sorted(by_kind.items()):
        print(f"  {kind:12s} {n:3d} injected, {spiking} spikes: tfguard caught {ours}, OLMo-core rule {theirs}")
    return 0 if total[0] == 0 and sums[3] >= 0.95 * sums[1] else 1


if __name__ == "__main__":
    raise SystemExit(main())
