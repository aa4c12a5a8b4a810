"""The instrumented step: a plain trace for most steps and a recording trace on the steps that record, or one trace for a guarded model."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfguard  # noqa: E402
from tests.conftest import deep_mlp, step_graph, traced_step  # noqa: E402
from tests.graphs import foldable  # noqa: E402
from tests.summary.conftest import tiny_cnn  # noqa: E402
from tfguard import _tags  # noqa: E402
from tfguard._firewall import instrument  # noqa: E402
from tfguard._firewall.config import GuardConfig  # noqa: E402
from tfguard._signals.record import HISTOGRAMS, SCALARS  # noqa: E402

BOTH = frozenset({SCALARS, HISTOGRAMS})


def _data(n=48):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 8, 8, 1)).astype("float32"), (np.arange(n) % 3).astype("int64")


def _listen(model, **request):
    """Subscribes a listener; histograms default to activations and gradients, as the logger's."""
    if request.get("histograms_every"):
        request.setdefault("histogram_kinds", ("activations", "gradients"))
    inst = instrument(model)
    seen = []
    inst.subscribe(lambda record: seen.append((record.step, {**record.scalars, **record.histograms})),
                   **request)
    return inst, seen


def _recording_graph(model, x_shape):
    """The graph of `model`'s recording trace (scalars and histograms), for inputs of `x_shape` and int64 labels."""
    instrument(model)
    return step_graph(model, (tf.TensorSpec(x_shape, tf.float32), tf.TensorSpec((None,), tf.int64)), BOTH)


def _by_layer(model):
    groups = {}
    for v in model.trainable_weights:
        parts = v.path.split("/")
        key = "/".join(parts[1:-1]) if parts[0] == model.name else "/".join(parts[:-1])
        groups.setdefault(key, []).append(np.array(v.numpy(), dtype=np.float64).ravel())
    return {k: np.concatenate(parts) for k, parts in groups.items()}


def test_signals_arrive_on_the_recording_steps_only():
    x, y = _data()
    model = tiny_cnn()
    _, seen = _listen(model, scalars_every=3, histograms_every=4)
    model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)  # 12 steps
    # a step records when the iterations before it are a multiple: 0, 3, 4, 6, 8, 9 -> after: +1
    assert [step for step, _ in seen] == [1, 4, 5, 7, 9, 10]
    scalar_steps = [s for s, sig in seen if _tags.GLOBAL_GRAD_NORM in sig]
    hist_steps = [s for s, sig in seen if any(t.startswith("hist/") for t in sig)]
    assert scalar_steps == [1, 4, 7, 10] and hist_steps == [1, 5, 9]


def test_the_plain_step_holds_no_signal_op_and_the_recording_step_is_traced_once(monkeypatch):
    from tfguard._firewall.host import HostLoop

    monkeypatch.setattr(HostLoop, "rent_before_buying", 0.0)  # the plain trace is worth tracing at once
    x, y = _data()
    model = tiny_cnn()
    inst, _ = _listen(model, scalars_every=5, histograms_every=5, weights=True,
                      histogram_kinds=("activations", "gradients", "weights"))
    model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    plans = inst.plans
    assert set(plans) == {frozenset(), BOTH}  # the scalars-only trace was never due: never built
    assert plans[frozenset()].scalar_keys == [] and plans[frozenset()].histogram_keys == []
    assert _tags.GLOBAL_GRAD_NORM in plans[BOTH].scalar_keys
    assert any(k.startswith("hist/gradients/") for k in plans[BOTH].histogram_keys)
    # weights after the update are the host's to bucket, outside the graph
    assert not any(k.startswith("hist/weights/") for k in plans[BOTH].histogram_keys)
    assert {tag for tag, _ in plans[BOTH].host_histograms} == {_tags.hist_weights(v.path) for v in model.weights}


def _traces_run(inst):
    """The trace each step of the model's host ran, in order ('recording' or 'plain')."""
    host = inst._host
    runs = []
    call = host._call

    def spy(key, kinds, argument):
        runs.append("recording" if key else "plain")
        return call(key, kinds, argument)

    host._call = spy
    return runs


def test_a_short_fit_of_a_listened_to_model_runs_its_idle_steps_on_the_recording_trace():
    # Rent or buy: twelve idle steps cost far less than a second trace and compile.
    x, y = _data()
    model = tiny_cnn()
    inst, seen = _listen(model, scalars_every=5)
    model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)  # 12 steps, 3 of them record
    assert set(inst.plans) == {BOTH}
    assert set(inst._host.first_calls) == {BOTH}  # the plain trace never ran
    assert [step for step, _ in seen] == [1, 6, 11]  # idle steps record nothing


def test_a_listened_to_model_traces_the_plain_step_once_its_idle_steps_spent_the_traces_price(monkeypatch):
    from tfguard._firewall.host import HostLoop

    x, y = _data()
    model = tiny_cnn()
    inst, seen = _listen(model, scalars_every=5)
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)  # makes the host
    runs = _traces_run(inst)
    monkeypatch.setattr(HostLoop, "rent_before_buying", 1e-12)  # the price: one idle step's rent
    inst._retrace()
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)  # steps 6-11: 10 records
    assert runs == ["recording", "recording", "plain", "plain", "recording", "plain"]
    assert set(inst.plans) == {BOTH, frozenset()}
    assert [step for step, _ in seen] == [1, 6, 11]
    # a model that is not listened to any more runs the plain trace it bought
    inst.unsubscribe(inst.bus.subscriptions[0].listener)
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert runs[6:] == ["plain"] * 6


def test_a_guarded_model_that_is_listened_to_has_one_trace_and_records_on_its_steps_only():
    x, y = _data()
    model = tiny_cnn()
    inst = instrument(model)
    inst.set_guard(GuardConfig(quarantine_dir=None))
    _, seen = _listen(model, scalars_every=3, histograms_every=4)
    model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)  # 12 steps
    assert set(inst.plans) == {BOTH}  # the transaction holds every value anyway: no second trace
    assert [step for step, _ in seen] == [1, 4, 5, 7, 9, 10]
    hist_steps = [s for s, sig in seen if any(t.startswith("hist/") for t in sig)]
    assert hist_steps == [1, 5, 9]
    norms = {s: sig[_tags.GLOBAL_GRAD_NORM] for s, sig in seen if _tags.GLOBAL_GRAD_NORM in sig}
    assert list(norms) == [1, 4, 7, 10] and all(value > 0 for value in norms.values())


def test_a_large_model_that_is_listened_to_has_one_trace_and_records_on_its_steps_only(monkeypatch):
    from tfguard._firewall import host

    monkeypatch.setattr(host, "HOLD_BYTES", 0)  # every model is 'large' now
    x, y = _data()
    model = tiny_cnn()
    inst, seen = _listen(model, scalars_every=3, histograms_every=4)
    model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)  # 12 steps
    assert set(inst.plans) == {BOTH}  # no second trace to compile and keep
    assert [step for step, _ in seen] == [1, 4, 5, 7, 9, 10]
    assert [s for s, sig in seen if any(t.startswith("hist/") for t in sig)] == [1, 5, 9]


@pytest.mark.parametrize("shape", ["cnn", "deep mlp", "deep mlp, guarded"])
def test_weight_norm_and_update_ratio_match_numpy(shape):
    # The deep MLP's weights of one shape are taken from one stack before (copied at the apply, or held
    # by the guard's transaction) and one after; the CNN's each alone.
    x, y = _data(8)
    if shape == "cnn":
        model = tiny_cnn()
    else:
        model, x = deep_mlp(8), x.reshape(8, -1)[:, :8]
        if shape.endswith("guarded"):
            tfguard.guard(model, policy="skip", quarantine_dir=None)
    _, seen = _listen(model, scalars_every=1, weights=True)
    model.fit(x, y, batch_size=8, verbose=0)  # one step: builds the optimizer
    before = _by_layer(model)
    model.fit(x, y, batch_size=8, verbose=0)
    after = _by_layer(model)
    step, got = seen[-1]
    assert step == 2
    assert {t for t in got if t.startswith(("weight_norm/", "update_ratio/"))} == (
        {_tags.weight_norm(k) for k in after} | {_tags.update_ratio(k) for k in after}
    )
    for key in after:
        np.testing.assert_allclose(got[_tags.weight_norm(key)], np.linalg.norm(after[key]), rtol=1e-5)
        expected = np.linalg.norm(after[key] - before[key]) / np.linalg.norm(before[key])
        np.testing.assert_allclose(got[_tags.update_ratio(key)], expected, rtol=1e-4)
        assert 0 < got[_tags.update_ratio(key)] < 1


def test_a_layer_with_all_zero_weights_has_no_ratio():
    x = np.ones((8, 4), "float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, kernel_initializer="zeros", name="z")])
    model.compile(optimizer="sgd", loss="mse")
    _, seen = _listen(model, scalars_every=1, weights=True)
    model.fit(x, np.ones((8, 2), "float32"), batch_size=8, verbose=0)
    (_, got), = seen
    assert _tags.update_ratio("z") not in got  # the step computes NO_RATIO; listeners never see it
    assert got[_tags.weight_norm("z")] > 0  # the update moved it off zero
    assert _tags.update_ratio("z") in instrument(model).plan.scalar_keys  # computed, as NO_RATIO


def test_weight_histograms_cover_every_float_weight_after_the_update():
    x, y = _data(8)
    model = tiny_cnn()
    _, seen = _listen(model, histograms_every=1, histogram_kinds=("weights",))
    model.fit(x, y, batch_size=8, verbose=0)
    (_, got), = seen
    weights = {_tags.hist_weights(v.path): v.numpy() for v in model.weights}
    assert {t for t in got if t.startswith("hist/weights/")} == set(weights)
    for tag, value in weights.items():
        counts = got[tag]
        assert counts.shape == (30, 3) and counts[:, 2].sum() == value.size
        # the range is the weights' after the update (Adam moved each by about 1e-2)
        np.testing.assert_allclose([counts[0, 0], counts[-1, 1]], [value.min(), value.max()], rtol=1e-6)


def test_layer_keys_of_gradient_and_weight_norms_line_up():
    x, y = _data(8)
    model = tiny_cnn()
    _, seen = _listen(model, scalars_every=1, weights=True)
    model.fit(x, y, batch_size=8, verbose=0)
    (_, got), = seen
    grad_layers = {t[len("grad_norm/"):] for t in got if t.startswith("grad_norm/") and t != _tags.GLOBAL_GRAD_NORM}
    weight_layers = {t[len("weight_norm/"):] for t in got if t.startswith("weight_norm/")}
    assert grad_layers == weight_layers == {"conv", "hidden", "out"}


def test_a_histogram_filter_saying_no_runs_the_plain_step():
    x, y = _data()
    model = tiny_cnn()
    asked = []
    inst, seen = _listen(model, histograms_every=1,
                         histogram_filter=lambda step: asked.append(step) or step in (2, 5))
    model.fit(x, y, batch_size=8, shuffle=False, verbose=0)
    assert asked == [1, 2, 3, 4, 5, 6]
    assert [step for step, _ in seen] == [2, 5]


def test_the_host_schedule_follows_a_moved_global_step():
    x, y = _data()
    model = tiny_cnn()
    _, seen = _listen(model, scalars_every=4)
    model.fit(x, y, batch_size=8, shuffle=False, verbose=0)  # steps 1..6: records at 1, 5
    model.optimizer.iterations.assign(10)  # e.g. a checkpoint restored between fits
    model.fit(x, y, batch_size=8, shuffle=False, verbose=0)  # 11..16: records at 13
    assert [step for step, _ in seen] == [1, 5, 13]


def test_the_recording_step_computes_gradients_once():
    x, y = _data(8)
    model = tiny_cnn()
    _listen(model, scalars_every=1, histograms_every=1, weights=True,
            histogram_kinds=("activations", "gradients", "weights"))
    model.fit(x, y, batch_size=8, verbose=0)
    graph = _recording_graph(model, (None, 8, 8, 1)).as_graph_def()
    ops = [n.op for n in list(graph.node) + [n for f in graph.library.function for n in f.node_def]]
    assert ops.count("Conv2DBackpropFilter") == 1


def test_a_guarded_recording_step_folds_nothing_the_size_of_the_data(tmp_path):
    # Constant folding at function instantiation turns anything computed from constants alone into a
    # constant kept for the life of the step: segment ids the size of a histogram group were ~11 MB
    # per group of 2**19 values (a ResNet50 under Logger() kept ~150 MB of them).
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.BatchNormalization(), keras.layers.Dense(64, activation="tanh"),
                              keras.layers.Dense(3)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    tfguard.guard(model, forward="layers", quarantine_dir=None)
    x, y = np.ones((8, 32), "float32"), np.zeros((8,), "int64")
    model.fit(x, y, batch_size=8, verbose=0, callbacks=[tfguard.Logger(str(tmp_path), histograms_every=1)])
    assert sum(v.shape.num_elements() for v in model.weights) > 4096  # one histogram group is larger
    assert foldable(_recording_graph(model, (None, 32)), 4096) == []


def test_activation_histograms_look_at_the_leading_examples_only():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64, 64, 1)), keras.layers.Conv2D(16, 3, activation="relu", name="big"),
                              keras.layers.GlobalAveragePooling2D(name="pool"), keras.layers.Dense(2, name="out")])
    model.compile(optimizer="sgd", loss="mse")
    _, seen = _listen(model, histograms_every=1)
    model.fit(np.ones((4, 64, 64, 1), "float32"), np.zeros((4, 2), "float32"), batch_size=4, verbose=0)
    (_, got), = seen
    per_example = 62 * 62 * 16  # 61,504 values: one example fits under the 2**16 sample
    assert got[_tags.hist_activations("big")][:, 2].sum() == per_example
    assert got[_tags.hist_activations("pool")][:, 2].sum() == 4 * 16  # small layers: the whole batch


def test_activation_histograms_are_bucketed_a_group_of_layers_at_a_time():
    # In one branch with the gradients' buckets, every layer output lived to the end of the step (a branch
    # holds its inputs until it has run): ResNet50 at batch 16 peaked ~250 MB higher. Traced for any batch
    # size, the samples' sizes are unknown: their bounds (2**16 values each) make groups of 8 layers.
    keras.utils.set_random_seed(0)
    acts = [keras.layers.Activation("softplus", name=f"act{i}") for i in range(20)]  # no scalar signal
    model = keras.Sequential([keras.Input((1024,)), *acts, keras.layers.Dense(1, name="out")])
    model.compile(optimizer="sgd", loss="mse")
    _, seen = _listen(model, histograms_every=1, histogram_kinds=("activations",))
    model.fit(np.ones((64, 1024), "float32"), np.zeros((64, 1), "float32"), batch_size=64, verbose=0)
    (_, got), = seen
    assert [got[_tags.hist_activations(f"act{i}")][:, 2].sum() for i in range(20)] == [64 * 1024] * 20
    graph = _recording_graph(model, (None, 1024))
    takers = {}  # activation layer -> the branches that take its output
    for op in graph.get_operations():
        if op.type in ("If", "StatelessIf"):
            for name in {t.op.name.split("/")[1] for t in op.inputs if t.op.name.count("/") > 1}:
                takers.setdefault(name, []).append(op.name)
    branches = [takers.get(f"act{i}_1", takers.get(f"act{i}", [])) for i in range(20)]
    assert all(len(taken) == 1 for taken in branches)  # each output into one branch
    per_branch = {}
    for (name,) in branches:
        per_branch[name] = per_branch.get(name, 0) + 1
    assert sorted(per_branch.values()) == [4, 8, 8]  # 2**19 values a group: 8 samples of 2**16


def test_the_recording_step_compiles_under_xla():
    x, y = _data()
    keras.utils.set_random_seed(0)
    model = tiny_cnn()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", jit_compile=True)
    _, seen = _listen(model, scalars_every=2, histograms_every=3, weights=True,
                      histogram_kinds=("activations", "gradients", "weights"))
    model.fit(x, y, batch_size=8, shuffle=False, verbose=0)
    assert model.jit_compile is True
    assert [step for step, _ in seen] == [1, 3, 4, 5]
    _, first = seen[0]
    assert np.isfinite(first[_tags.GLOBAL_GRAD_NORM]) and first[_tags.GLOBAL_GRAD_NORM] > 0
    counts = first[_tags.hist_activations("conv")]
    assert counts[:, 2].sum() == 8 * 6 * 6 * 4  # segment-sum buckets under XLA, whole (small) batch


def test_a_loss_scale_overflow_does_not_move_the_schedule():
    """A LossScaleOptimizer drops overflowing updates without moving `iterations`: so does the schedule."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, name="d")])
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(1e-9), initial_scale=2.0**120)
    model.compile(optimizer=optimizer, loss="mse")
    _, seen = _listen(model, scalars_every=3, weights=True)
    seen_iterations = []
    inst = instrument(model)
    # the inner optimizer counts the applied updates (Keras 3.8 and older give the wrapper a counter that never moves)
    inst.subscribe(lambda record: seen_iterations.append(int(optimizer.inner_optimizer.iterations.numpy())),
                   scalars_every=3)
    rng = np.random.default_rng(0)
    model.fit(rng.normal(size=(96, 4)).astype("float32"), np.full((96, 2), 1e4, "float32"), batch_size=8,
              shuffle=False, verbose=0)
    steps = [step for step, _ in seen]
    assert steps == seen_iterations  # every record at the step the optimizer is really at
    assert steps[0] == 0 and 1 in steps  # overflows record at step 0; the first real update records too
    final = int(optimizer.inner_optimizer.iterations.numpy())
    assert final < 12 and all(s % 3 in (0, 1) for s in steps)
    overflowed = [signals for step, signals in seen if step == 0]
    assert all(_tags.weight_norm("d") not in s for s in overflowed)  # no update: no weight signal
    applied = [signals for step, signals in seen if step > 0]
    # the signals describe the true gradients (about 1e5 here), not the scaled ones
    assert all(np.isfinite(s[_tags.GLOBAL_GRAD_NORM]) and s[_tags.GLOBAL_GRAD_NORM] < 1e8 for s in applied)  # scaled: ~1e40


def test_two_listeners_cost_their_union_and_each_gets_its_own_period():
    x, y = _data(96)
    model = tiny_cnn()
    inst = instrument(model)
    every3, every10, calls = [], [], []
    inst.subscribe(lambda r: every3.append(r.step), scalars_every=3)
    inst.subscribe(lambda r: every10.append(r.step), scalars_every=10)
    host_call = inst.bus.due
    inst.bus.due = lambda start: calls.append(start) or host_call(start)
    model.fit(x, y, batch_size=8, shuffle=False, verbose=0)  # 12 steps
    assert every3 == [1, 4, 7, 10] and every10 == [1, 11]
    recorded = sorted(set(every3) | set(every10))
    assert len(recorded) == 5 and recorded == [1, 4, 7, 10, 11]  # not every step
    assert len(calls) == 12  # the host decides once per step


def test_a_record_is_immutable_and_holds_the_step_logs():
    x, y = _data(16)
    model = tiny_cnn()
    records = []
    instrument(model).subscribe(records.append, scalars_every=1)
    model.fit(x, y, batch_size=8, shuffle=False, verbose=0)
    first = records[0]
    assert first.step == 1 and first.batch == 0 and first.epoch == 0 and first.moved
    assert "loss" in first.logs and np.isfinite(first.logs["loss"])
    try:
        first.scalars["grad_norm/global"] = 0.0
    except TypeError:
        pass
    else:  # pragma: no cover - the assertion below names the failure
        raise AssertionError("a listener could change the record another listener reads")
    assert records[1].batch == 1


def test_a_small_models_recording_trace_adds_to_its_step_a_few_ops_whatever_its_depth():
    # Its per-layer work lives in branches (one `If` each) that run only on recording steps. Lowered
    # conds at the optimizer's apply and values held across the update put a `Switch` per gradient and a
    # read per weight into every step: 60 ops more than the plain trace at 4 layers, 154 at 16.
    extra = {}
    for depth in (4, 16):
        model = deep_mlp(depth)
        _listen(model, scalars_every=1, histograms_every=2, weights=True,
                histogram_kinds=("activations", "gradients", "weights"))
        model.fit(np.ones((8, 8), "float32"), np.zeros(8, "int64"), verbose=0)
        recording = len(_recording_graph(model, (None, 8)).get_operations())
        plain = len(traced_step(model).get_concrete_function(
            (tf.TensorSpec((None, 8), tf.float32), tf.TensorSpec((None,), tf.int64))).graph.get_operations())
        extra[depth] = recording - plain
    assert extra[4] < 40
    layers_more = (16 + 4) - (4 + 1)
    assert extra[16] - extra[4] <= layers_more / 3  # one more branch per group of 8 activation samples


def test_a_deep_models_recording_branches_cost_a_few_ops_per_layer():
    # Signals of the weights, gradients and outputs of one shape are computed from one stack: what is
    # left per layer is a read of each weight before and after its update and one max per ReLU output.
    # Each weight's norms, change and zero count took 40 ops per layer of this MLP.
    branch_ops, layers = {}, {}
    for depth in (8, 24):
        model = deep_mlp(depth)
        _listen(model, scalars_every=1, weights=True)
        model.fit(np.ones((8, 8), "float32"), np.zeros(8, "int64"), verbose=0)
        graph = step_graph(model, (tf.TensorSpec((None, 8), tf.float32), tf.TensorSpec((None,), tf.int64)),
                           {SCALARS}).as_graph_def()
        branch_ops[depth] = sum(len(f.node_def) for f in graph.library.function)
        layers[depth] = len(model.layers)
    assert (branch_ops[24] - branch_ops[8]) / (layers[24] - layers[8]) <= 8


class WithIdleLayer(keras.Model):
    """A step that passes a layer's weights to `apply` without a gradient for them (a frozen branch)."""

    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(4, name="hidden")
        self.idle = keras.layers.Dense(4, name="idle")
        self.out = keras.layers.Dense(3, name="out")

    def call(self, x):
        return self.out(self.hidden(x))

    def build(self, shape):
        self.hidden.build(shape)
        self.idle.build((None, 4))
        self.out.build((None, 4))
        self.built = True

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = self.compute_loss(x=x, y=y, y_pred=self(x))
        variables = self.trainable_variables
        self.optimizer.apply(tape.gradient(loss, variables), variables)
        return {"loss": loss}


def test_a_weight_passed_without_a_gradient_still_reports_an_update_ratio_of_zero():
    # Its ratio of 0 is the signal that a layer does not train; the weights copied at the apply for
    # update ratios (a step that does not restore) must include it, as a guard's held state does.
    keras.utils.set_random_seed(0)
    model = WithIdleLayer()
    model.build((None, 5))
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    _, seen = _listen(model, scalars_every=1, weights=True)
    x = np.random.default_rng(0).normal(size=(16, 5)).astype("float32")
    model.fit(x, np.arange(16) % 3, batch_size=8, verbose=0)
    idle_norm = np.sqrt(sum(float(np.sum(np.square(v.numpy()))) for v in model.idle.trainable_variables))
    for _, scalars in seen:
        assert scalars[_tags.update_ratio("idle")] == 0.0
        assert np.isclose(scalars[_tags.weight_norm("idle")], idle_norm, rtol=1e-5)
        assert scalars[_tags.update_ratio("hidden")] > 0
