"""Every number a diagnosis rule compares against, named, documented and sourced.

The defaults come from the published rules tfguard starts from, or were
measured on tfguard's own buggy and healthy training programs
(`tests/diagnose/programs.py`), as each field says:

- AUTOTRAINER: X. Zhang et al., "AUTOTRAINER: An Automatic DNN Training
  Problem Detection and Repair System", ICSE 2021 (defaults `beta_1=1e-3`,
  `beta_2=1e-4`, `beta_3=70`, `gamma=0.7`, `zeta=0.03`, `eta=0.2`,
  `delta=0.01`, `Theta=0.7` of its `utils/monitor.py`).
- DeepDiagnosis: M. Wardat et al., "DeepDiagnosis: Automatically Diagnosing
  Faults and Recommending Actionable Fixes in Deep Learning Programs",
  ICSE 2022.
- TheDeepChecker: H. Ben Braiek and F. Khomh, "Testing Feature of Neural
  Networks: TheDeepChecker" (property-based checks of training: loss must
  decrease, updates/parameters ratio, normalized inputs).
- OLMo-core: the `SkipStepOptimizer` of allenai/OLMo-core
  (`olmo_core/optim/skip_step_optimizer.py`: `rolling_interval_length=128`,
  `sigma_factor=6`), the loss-spike rule the firewall's spike stage runs.
- "tfguard: measured": chosen on tests/diagnose cases so that every buggy
  program is detected and no healthy program raises a warning.

A warning needs evidence that the run is hurt, or will be (issue 22). A
symptom seen while every loss keeps falling and validation keeps improving
(`tfguard.diagnose._rules.base.run_improving`) needs stronger evidence than
one seen on a stalled run: there, exploding-gradient growth and dead or
zero-gradient units (short of a layer dead as a whole) are reported as
`info`, and a too-wide initializer or a learning rate far above its
default is reported only with the harm it does (a first loss far above
chance, a NaN, dead ReLUs, oscillation). The published thresholds below
keep their sources; this gate is tfguard's, measured on the user-shaped
programs (`benchmarks/diagnosis_user_programs.py`: 0 false alarms on the
healthy half).

Example:

>>> from tfguard.diagnose import Thresholds
>>> Thresholds().dead_fraction
0.7
>>> Thresholds.resolve({"dead_fraction": 0.9}).dead_fraction
0.9
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from tfguard._errors import ContractError


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """The thresholds of all rules.

    Args:
        persistence: consecutive observations a step-level symptom must hold
            before it is reported (one noisy batch never raises a finding).
            tfguard: measured (2 gave false dead-ReLU alarms on the first
            batches of healthy runs). Defaults to `3`.
        baseline_points: the first finite observations whose median is a
            series' baseline (gradient-norm growth). tfguard: measured.
            Defaults to `5`.
        explode_growth: a gradient norm (global or one layer) this many times
            its baseline is exploding. tfguard: measured (healthy programs
            peak below 12x; diverging ones pass 1000x). A growth while every
            loss keeps falling and validation keeps improving
            (`run_improving`) is only an info: a warning needs evidence that
            the run is hurt (issue 22: a healthy sigmoid softmax MLP on iris).
            Defaults to `100.0`.
        explode_before_nan_growth: a gradient norm that grew this many
            times between its first observation and the last one before the
            run turned non-finite exploded before the NaN (too few points for
            a baseline). tfguard: measured (a deep ReLU stack initialized 2x
            too wide grows by 1e8 in three steps; healthy runs' norms change
            less than 12x). Defaults to `10.0`.
        init_std_ratio: a kernel initializer whose weights' standard
            deviation is this many times He initialization's `sqrt(2/fan_in)`
            (the widest standard scheme: He et al., ICCV 2015) is far too
            wide; reported only with `init_loss_factor` or a NaN as evidence
            of harm. tfguard: measured (Keras's defaults are below 1x; the
            faults of issue 22 are 2.3x to 60x). Defaults to `2.0`.
        init_loss_factor: a first batch loss this many times a uniform
            guess's (`ln K` for K classes, `ln 2` binary) shows a network
            that explodes from the first step. tfguard: measured (fresh
            Glorot/He networks start within 1.5x of chance; a 3x too wide
            convnet starts at 6000x). Defaults to `10.0`.
        init_window: the first steps in which a too-wide initializer's harm
            must show. tfguard: measured. Defaults to `50`.
        init_narrow_signal: a plain stack of layers (no normalization or
            residual connection between them) whose initializers, each
            compared with the scale that keeps a signal's size through the
            layer (He's `sqrt(2/fan_in)` before a ReLU, LeCun's
            `sqrt(1/fan_in)` otherwise: He et al., ICCV 2015), multiply to
            less than this shrinks the signal that reaches its last hidden
            layer, and the gradient that comes back, by that factor; a
            remark until training shows vanishing gradients, dead ReLUs, an
            output that collapsed or no learning. He et al. show a 30-layer
            Glorot ReLU network (0.71x per layer) that does not learn;
            tfguard: measured (Keras's default Glorot on an MLP of 5 hidden
            layers of 128 units: 0.19; the public bugs' stacks: 1.4e-5 for
            33 Glorot ReLU layers, 2e-11 for eight RandomUniform(+-0.05)
            layers of 5 units). Defaults to `1e-3`.
        explode_ratio: first-layer / last-layer gradient-norm ratio above
            which gradients explode. AUTOTRAINER `beta_3`. Defaults to `70.0`.
        vanish_ratio: first-layer / last-layer gradient-norm ratio below
            which gradients vanish. AUTOTRAINER `beta_1`. Defaults to `1e-3`.
        vanish_first_norm: and the first layer's gradient norm must be below
            this, unless the run is at chance (`chance_margin`): a norm's size
            depends on the layer's size and the loss's scale (a deep sigmoid
            LeNet at accuracy 0.10 had its first convolution at 7e-4, 1/1800
            of its last layer). AUTOTRAINER `beta_2`. Defaults to `1e-4`.
        dead_fraction: fraction of a ReLU layer's units that are <= 0 for a
            whole batch above which the layer is dying. DeepDiagnosis (dead
            node at 70 %), AUTOTRAINER `gamma`. Defaults to `0.7`.
        dead_error_fraction: above this fraction the layer is dead and the
            finding is an error (nothing flows through it). While the run
            keeps improving, only a layer this dead stays a warning or error;
            fewer dead units are an info. tfguard: measured. Defaults to `0.99`.
        zero_grad_fraction: fraction of a layer's gradient entries that are
            exactly zero above which ReLUs are dying (used when no activation
            statistics were logged). AUTOTRAINER `gamma`. Zero entries are
            not dead units (a wide ReLU layer fed by a 2-d latent has 77 % by
            construction, issue 22): while the run keeps improving this is
            an info. Defaults to `0.7`.
        saturated_fraction: fraction of a sigmoid/tanh layer's
            pre-activations outside +-5 above which it is saturated.
            DeepDiagnosis. Defaults to `0.5`.
        osc_rise_rel: a move (up or down) of the epoch or windowed training
            loss is significant when it exceeds this fraction of the previous
            value. tfguard: measured. Defaults to `0.1`.
        osc_rise_abs: ... and this fraction of the initial loss (keeps the
            jitter of a nearly-zero loss from counting). AUTOTRAINER `zeta`
            (0.03, a swing of accuracy) applied to the loss scale.
            Defaults to `0.03`.
        osc_rate: reversals of direction between significant moves must
            number at least this fraction of the observed intervals.
            AUTOTRAINER `eta`. Defaults to `0.2`.
        osc_min_swings: and at least this many (a loss that only climbs has
            none: that is divergence, not oscillation). tfguard: measured.
            Defaults to `3`.
        osc_window: per-batch losses are summarized by the median of
            windows of this many observations before swings are counted.
            tfguard: measured. Defaults to `8`.
        min_epochs: epochs needed before a loss-curve rule (no learning,
            slow convergence, overfitting) may fire. tfguard: measured.
            Defaults to `4`.
        nl_min_drop: the training loss must have fallen by at least this
            fraction of its initial value, else nothing is learnt.
            TheDeepChecker (loss must decrease); tfguard: measured.
            Defaults to `0.02`.
        nl_acc_delta: with epoch-only logs, accuracy must also never gain
            more than this in one epoch for `no_learning`. AUTOTRAINER
            `delta`. Defaults to `0.01`.
        nl_acc_rise: a training accuracy this far above its first epoch's is
            learning: no `no_learning`, whatever the loss did (issue 46: two
            embedding models rising from 0.51 to 0.66 were told they learn
            nothing). tfguard: measured. Defaults to `0.05`.
        satisfied_accuracy: a run whose training accuracy reaches this is
            never said to learn nothing or too slowly. AUTOTRAINER `Theta`.
            Defaults to `0.7`.
        chance_margin: a classifier whose best training accuracy stays within
            this of `1 / K` (K classes), or whose best loss stays within this
            fraction of a uniform guess's (`ln K`), is at chance: never
            "improving", so its symptoms are warnings, not remarks (issue 41:
            a deep sigmoid network stuck at accuracy 0.497 got its vanishing
            gradients as a remark). tfguard: measured on the user-shaped
            programs (`benchmarks/diagnosis_user_programs.py`: none of the 22
            healthy ones is at chance by this margin).
            Defaults to `0.05`.
        slow_max_progress: after `min_epochs` epochs, a training loss still
            above `1 - slow_max_progress` of its initial value, and still
            decreasing at an even pace, converges too slowly. tfguard:
            measured. Defaults to `0.3`.
        slow_min_steps: optimizer steps needed before `slow_convergence` may
            fire (when the logs know steps): a few dozen steps of a healthy
            run have not bent the curve yet. tfguard: measured (a healthy
            Adam run had removed 30 % of its loss after 24 steps).
            Defaults to `200`.
        slow_bend: a curve whose first-half drop exceeds this many times its
            second-half drop has bent (it converged fast, then flattened) and
            is not slow. tfguard: measured. Defaults to `3.0`.
        overfit_rise: the validation loss must rise this fraction above its
            minimum. tfguard: measured (AUTOTRAINER counts train-down /
            val-up epochs). Defaults to `0.1`.
        overfit_epochs: consecutive epochs it must stay above, while the
            training loss stays below its value at the best epoch.
            tfguard: measured. Defaults to `3`.
        overfit_min_val_examples: a validation set of fewer examples (when
            the fit's validation data is in memory and so counted) is too
            small to judge overfitting: the rule records that it could not
            decide. tfguard: measured (issue 41: d4ml-086's published fix
            validates on one example, whose loss rose 158 %, read as
            overfitting); the bar of 30 is a judgment: below it one example
            that turns confidently wrong (a cross-entropy of about 3) moves a
            mean loss near 1 by the `overfit_rise` the rule looks for.
            Defaults to `30`.
        input_std_max: a median per-batch input standard deviation above
            this is unnormalized. TheDeepChecker (inputs must be
            normalized); tfguard: measured (raw pixels: 80-110, sklearn's
            digits 0..16: 6). Defaults to `10.0`.
        input_mean_max: a median absolute per-batch input mean above this is
            unnormalized. TheDeepChecker; tfguard: measured. Defaults to `10.0`.
        pipeline_single_class: fraction of observed batches holding a single
            class above which the pipeline batches unshuffled (sorted) data.
            tfguard: measured (a shuffled 3-class batch of 16 is single-class
            with probability 3 * 3**-16). Defaults to `0.8`.
        pipeline_min_batches: batches of label statistics needed before that
            rule may fire. tfguard: measured. Defaults to `6`.
        pipeline_min_batch_size: with a smaller batch size (the fit's
            `batch_size`, when known) single-class batches are chance, not a
            sorted pipeline: a batch of 1 always holds one class. tfguard:
            measured (issue 22: SGD at batch size 1 read as unshuffled).
            Defaults to `8`.
        lr_jump: a training loss that rises this many times above its first
            observed value within the first epoch, or turns non-finite there,
            diverges: the learning rate is far too high. tfguard: measured
            (healthy runs stay below 2x; SGD with a 10x too large rate jumps
            by orders of magnitude within tens of steps). Defaults to `10.0`.
        lr_jump_min_batch: at a batch size below this (the fit's
            `batch_size`, when known), the loss-jump test compares with the
            median of the first `baseline_points` losses, not the first: the
            loss of one example or a few is one draw from their spread.
            tfguard: measured (issue 41: Adam's default rate at batch size 1
            read as far too high, the first example's loss 0.41, the running
            mean 4.1 at step 9 while the run trained well). Defaults to `8`.
        update_ratio_max: a median per-step ||update|| / ||weights|| above this,
            in any layer, means steps far too large. TheDeepChecker's upper
            bound (1e-1); tfguard requires it over `persistence` observations.
            Defaults to `0.1`.
        update_ratio_fatal: an update this many times a layer's weights, right
            before a run turns non-finite in its first epoch, is a step far too
            large, however few steps it lived (persistence needs more). An
            update as large as the weights themselves: tfguard's reading of
            TheDeepChecker's bound (healthy runs stay near 1e-3; a loss summed
            over a batch of 205 under SGD(0.01) moved 4.8x, then NaN).
            Defaults to `1.0`.
        update_ratio_min: a median ratio below this in every layer, while the
            loss does not decrease, means steps far too small. TheDeepChecker's
            lower bound is 1e-4; tfguard: measured (healthy Adam and SGD runs
            stay above 1e-4 after their first steps), set lower to stay quiet
            on converged runs. Defaults to `1e-6`.
        lr_default_factor: a learning rate this many times above its
            optimizer's Keras default (SGD 0.01, Adam and the others 0.001)
            is far outside the usual range; it is reported when training
            also shows a symptom such a rate produces (dead ReLUs, no
            learning, oscillation, NaN). SGD's rate is read as a step size,
            `rate / (1 - momentum)` (heavy-ball momentum multiplies a steady
            step by that; Goodfellow et al., "Deep Learning", 8.3.2).
            tfguard: measured (the healthy runs tried use 1-10x their
            default; SGD 0.05 with momentum 0.9 at batch size 1 is 50x and
            kills its ReLUs). Defaults to `30.0`.
        input_wait_max: a median share of a step spent waiting for the next
            batch (`perf/input_wait_fraction`) above this means the input
            pipeline, not the model, sets the pace. tf.data performance guide
            (an accelerator idle while the host prepares data); tfguard:
            measured in tests/diagnose/test_pipeline_pitfalls.py (a cached,
            prefetched pipeline of a small model: about 0.2). Defaults to `0.5`.
        cpu_wait_max: a run whose threads spent more than this share of their
            runnable time waiting for a CPU (`perf/cpu_wait_fraction`, from
            Linux's per-thread run-queue times) ran on a machine other
            processes kept busy: its input wait is not blamed on the pipeline
            unless the static check names a slow stage. tfguard: measured on
            the 2-core machine these tests ran on, at a load average of 6: a
            small regression read 0.65 alone and 0.75-0.8 pinned to one CPU
            with two CPU-bound processes (an idle machine was not at hand; the
            bar is a quarter of the threads' runnable time lost to others).
            Defaults to `0.25`.
        little_evidence_skipped: a completed run where more than this
            fraction of the rules could not run (their signals were not
            logged) gets the status "little evidence", listing what is
            missing, never "healthy": "healthy" means the rules looked.
            tfguard: measured (issue 22: the healthy user-shaped programs,
            custom steps and GANs included, skip 1-4 of 16 rules; a WGAN-GP
            with no recorded signals skipped 13). Defaults to `0.5`.
        spike_window: `loss_spike` on logged batch losses compares each with
            the mean and std of this many points before it (the spikes left
            out). OLMo-core's `SkipStepOptimizer(rolling_interval_length=128)`,
            the firewall's default (`tfguard.SpikeConfig`). Defaults to `128`.
        spike_sigmas: a point this many standard deviations above that mean
            is a spike. OLMo-core's `sigma_factor=6`. Defaults to `6.0`.
        spike_warmup: the points the window must hold before a spike is
            called. OLMo-core's `rolling_interval_length // 2`. Defaults to `64`.
    """

    persistence: int = 3
    baseline_points: int = 5
    explode_growth: float = 100.0
    explode_before_nan_growth: float = 10.0
    init_std_ratio: float = 2.0
    init_loss_factor: float = 10.0
    init_window: int = 50
    init_narrow_signal: float = 1e-3
    explode_ratio: float = 70.0
    vanish_ratio: float = 1e-3
    vanish_first_norm: float = 1e-4
    dead_fraction: float = 0.7
    dead_error_fraction: float = 0.99
    zero_grad_fraction: float = 0.7
    saturated_fraction: float = 0.5
    osc_rise_rel: float = 0.1
    osc_rise_abs: float = 0.03
    osc_rate: float = 0.2
    osc_min_swings: int = 3
    osc_window: int = 8
    min_epochs: int = 4
    nl_min_drop: float = 0.02
    nl_acc_delta: float = 0.01
    nl_acc_rise: float = 0.05
    satisfied_accuracy: float = 0.7
    chance_margin: float = 0.05
    slow_max_progress: float = 0.3
    slow_min_steps: int = 200
    slow_bend: float = 3.0
    overfit_rise: float = 0.1
    overfit_epochs: int = 3
    overfit_min_val_examples: int = 30
    input_std_max: float = 10.0
    input_mean_max: float = 10.0
    pipeline_single_class: float = 0.8
    pipeline_min_batches: int = 6
    pipeline_min_batch_size: int = 8
    lr_jump: float = 10.0
    lr_jump_min_batch: int = 8
    update_ratio_max: float = 0.1
    update_ratio_fatal: float = 1.0
    update_ratio_min: float = 1e-6
    lr_default_factor: float = 30.0
    input_wait_max: float = 0.5
    cpu_wait_max: float = 0.25
    little_evidence_skipped: float = 0.5
    spike_window: int = 128
    spike_sigmas: float = 6.0
    spike_warmup: int = 64

    @classmethod
    def resolve(cls, thresholds: Thresholds | Mapping | None) -> Thresholds:
        """Turns `None`, a `Thresholds` or a mapping of overrides into `Thresholds`.

        Args:
            thresholds: `None` for the defaults, a `Thresholds`, or a
                mapping `{name: value}` overriding some defaults.

        Returns:
            A `Thresholds`.

        Raises:
            ContractError: if a name is not a threshold.
        """
        if thresholds is None:
            return cls()
        if isinstance(thresholds, cls):
            return thresholds
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(thresholds) - names)
        if unknown:
            raise ContractError(
                f"Received unknown threshold names, expected names among {sorted(names)}. "
                f"Received: {unknown}"
            )
        return dataclasses.replace(cls(), **dict(thresholds))
