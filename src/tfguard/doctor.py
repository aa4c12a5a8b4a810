"""Environment check: versions, two Kerases, GPUs, XLA and what it does to asserts.

Long because: one `check_*` per line of the report, each short and measured on this machine.

`run_doctor()` returns one `DoctorCheck` per line, each `"ok"`, `"warning"`
or `"problem"` with a detail and, where something can be done, a fix. Every
line is measured on this machine, not looked up: the XLA line compiles a
tiny function with a failing `tf.debugging` assert and reports what really
happened (eagerly it raises; under `jit_compile=True` it is silently
skipped).

Nothing here prints or exits: `render_doctor` takes a console,
`doctor_json` returns text and `doctor_exit_code` returns the exit code.

Example:

>>> from tfguard.doctor import DoctorCheck, doctor_exit_code, run_doctor
>>> [c.name for c in run_doctor(xla_demo=False)][:3]
['python', 'tensorflow', 'keras']
>>> warning = DoctorCheck("profile_plugin", "warning", "not installed", "pip install ...")
>>> problem = DoctorCheck("keras", "problem", "Keras 2.15.0", "pip install 'keras>=3.7,<3.16'")
>>> doctor_exit_code([warning]), doctor_exit_code([warning, problem])  # warnings do not fail
(0, 1)
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from packaging.version import InvalidVersion, Version

from tfguard._errors import ContractError
from tfguard._versions import KERAS_RANGE, TENSORFLOW_RANGE, judge_pair, specifier

STATUSES = ("ok", "warning", "problem")
MIN_PYTHON = (3, 10)
LEGACY_KERAS_VALUES = ("true", "True", "1")  # what tensorflow/__init__.py accepts


@dataclasses.dataclass(frozen=True)
class DoctorCheck:
    """One line of the doctor's report.

    Args:
        name: a stable id, e.g. `"xla_asserts"`.
        status: `"ok"`, `"warning"` or `"problem"`.
        detail: what was found, with the numbers.
        fix: what to do about it, or `None`. Defaults to `None`.
    """

    name: str
    status: str
    detail: str
    fix: str | None = None

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ContractError(
                f"Received an invalid value for `status`, expected one of {STATUSES}. "
                f"Received: status={self.status!r}"
            )


def _version_tuple(version: str) -> tuple[int, ...]:
    """The release numbers of a version string (`packaging.version`), `()` if it is not one."""
    try:
        return Version(version).release
    except InvalidVersion:
        return ()


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _tf():
    import tensorflow as tf

    return tf


# -- versions -------------------------------------------------------------------------


def check_python() -> DoctorCheck:
    """Python version (tfguard needs 3.10 or newer)."""
    version = platform.python_version()
    if sys.version_info[:2] < MIN_PYTHON:
        return DoctorCheck(
            "python",
            "problem",
            f"Python {version}; tfguard needs 3.10 or newer",
            "use Python 3.10-3.13",
        )
    return DoctorCheck("python", "ok", f"Python {version} ({sys.executable})")


def check_tensorflow() -> DoctorCheck:
    """TensorFlow imports (whether its version is supported is the `versions` line)."""
    try:
        tf = _tf()
    except Exception as e:  # a broken install raises many kinds
        return DoctorCheck(
            "tensorflow",
            "problem",
            f"TensorFlow cannot be imported: {type(e).__name__}: {e}",
            f"pip install 'tensorflow{specifier(TENSORFLOW_RANGE)}'",
        )
    return DoctorCheck("tensorflow", "ok", f"TensorFlow {tf.__version__}")


def check_keras() -> DoctorCheck:
    """Keras is 3.x on the TensorFlow backend (whether its version is supported is the `versions` line)."""
    try:
        import keras
    except Exception as e:
        return DoctorCheck(
            "keras",
            "problem",
            f"Keras cannot be imported: {type(e).__name__}: {e}",
            f"pip install 'keras{specifier(KERAS_RANGE)}'",
        )
    return judge_keras(keras.__version__, keras.config.backend())


def judge_keras(version: str, backend: str) -> DoctorCheck:
    """The verdict on a Keras and its backend: Keras 3 on TensorFlow.

    Example:

    >>> [judge_keras(v, b).status for v, b in (("3.15.1", "tensorflow"), ("2.15.0", "tensorflow"),
    ...                                         ("3.15.1", "jax"), ("3.10.0", "tensorflow"))]
    ['ok', 'problem', 'problem', 'ok']
    """
    if _version_tuple(version)[:1] != (3,):
        return DoctorCheck(
            "keras",
            "problem",
            f"Keras {version}; tfguard needs Keras 3",
            f"pip install 'keras{specifier(KERAS_RANGE)}'",
        )
    if backend != "tensorflow":
        return DoctorCheck(
            "keras",
            "problem",
            f"Keras {version} runs on the {backend!r} backend; tfguard needs 'tensorflow'",
            "unset KERAS_BACKEND or set KERAS_BACKEND=tensorflow",
        )
    return DoctorCheck("keras", "ok", f"Keras {version} (backend tensorflow)")


def check_versions() -> DoctorCheck:
    """Whether tfguard supports the TensorFlow / Keras pair that imports here."""
    import keras

    return judge_versions(_tf().__version__, keras.__version__)


def judge_versions(tensorflow: str, keras: str) -> DoctorCheck:
    """The verdict on a TensorFlow / Keras pair (`tfguard._versions.judge_pair`), and what to install if unsupported.

    A pair newer than the newest tested is a warning (it may well work);
    an older or mismatched one is a problem.

    Example:

    >>> [judge_versions(*pair).status for pair in (("2.19.1", "3.10.0"), ("2.22.0", "3.16.0"),
    ...                                            ("2.16.2", "3.6.0"), ("2.21.0", "3.10.0"))]
    ['ok', 'warning', 'problem', 'problem']
    """
    verdict = judge_pair(tensorflow, keras)
    if verdict.supported:
        return DoctorCheck("versions", "ok", verdict.describe())
    return DoctorCheck("versions", "warning" if verdict.newer else "problem", verdict.describe(), verdict.fix)


def check_tensorboard() -> DoctorCheck:
    """TensorBoard is installed (TF 2.21 no longer brings it) and matches TensorFlow."""
    try:
        has_scalar = hasattr(_tf().summary, "scalar")
    except Exception:
        has_scalar = False
    tf_version = _dist_version("tensorflow") or _dist_version("tensorflow-cpu") or ""
    return judge_tensorboard(_dist_version("tensorboard"), tf_version, has_scalar)


def judge_tensorboard(version: str | None, tf_version: str, has_scalar: bool) -> DoctorCheck:
    """The verdict on TensorBoard: installed, `tf.summary.scalar` there, same minor as TensorFlow.

    Example:

    >>> [judge_tensorboard(*a).status for a in (("2.21.0", "2.21.0", True), (None, "2.21.0", False),
    ...                                          ("2.20.0", "2.21.0", True), ("2.21.0", "2.21.0", False))]
    ['ok', 'problem', 'warning', 'problem']
    """
    if version is None:
        return DoctorCheck(
            "tensorboard",
            "problem",
            "TensorBoard is not installed: TensorFlow 2.21 no longer depends on it, and "
            "without it tf.summary.scalar/histogram/image/text do not exist",
            f"pip install 'tensorboard=={'.'.join(tf_version.split('.')[:2])}.*'" if tf_version
            else f"pip install 'tensorboard{specifier(TENSORFLOW_RANGE)}'",
        )
    if not has_scalar:
        return DoctorCheck(
            "tensorboard",
            "problem",
            f"TensorBoard {version} is installed but tf.summary.scalar is missing",
            "reinstall tensorboard in the same environment as tensorflow",
        )
    if tf_version and _version_tuple(version)[:2] != _version_tuple(tf_version)[:2]:
        return DoctorCheck(
            "tensorboard",
            "warning",
            f"TensorBoard {version} with TensorFlow {tf_version}: the minor versions differ",
            f"pip install 'tensorboard=={'.'.join(tf_version.split('.')[:2])}.*'",
        )
    return DoctorCheck("tensorboard", "ok", f"TensorBoard {version}; tf.summary.* available")


def check_legacy_keras() -> DoctorCheck:
    """Two Kerases: `tf_keras` installed, or `TF_USE_LEGACY_KERAS` routing `tf.keras` to it."""
    env = os.environ.get("TF_USE_LEGACY_KERAS")
    legacy_on = env in LEGACY_KERAS_VALUES
    tf_keras = _dist_version("tf_keras") or _dist_version("tf-keras")
    if legacy_on:
        if tf_keras is None:
            detail = (
                f"TF_USE_LEGACY_KERAS={env} but tf_keras is not installed: "
                "`tf.keras` raises ImportError"
            )
        else:
            detail = (
                f"TF_USE_LEGACY_KERAS={env}: `tf.keras` is tf_keras {tf_keras} (Keras 2) while "
                "`import keras` is Keras 3; models and layers of one do not work with the "
                "other, and tfguard uses Keras 3"
            )
        return DoctorCheck(
            "legacy_keras", "problem", detail, "unset TF_USE_LEGACY_KERAS (or set it to 0)"
        )
    try:
        import keras

        same = _tf().keras.Model is keras.Model
    except Exception as e:
        return DoctorCheck(
            "legacy_keras",
            "problem",
            f"`tf.keras` cannot be resolved: {type(e).__name__}: {e}",
            f"pip install 'keras{specifier(KERAS_RANGE)}'",
        )
    if not same:
        return DoctorCheck(
            "legacy_keras",
            "problem",
            "`tf.keras.Model` is not `keras.Model`: tf.keras and keras are different Kerases",
            "use `import keras` everywhere, with Keras 3",
        )
    if tf_keras is not None:
        return DoctorCheck(
            "legacy_keras",
            "warning",
            f"tf_keras {tf_keras} (Keras 2) is installed next to Keras 3; `tf.keras` is "
            "Keras 3 here, but code that imports tf_keras gets Keras 2",
            "pip uninstall tf_keras, unless a project needs it",
        )
    return DoctorCheck(
        "legacy_keras", "ok", "one Keras: `tf.keras` is Keras 3, tf_keras is not installed"
    )


# -- GPUs -----------------------------------------------------------------------------


def _nvidia_driver() -> bool:
    return Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi") is not None


def check_gpu() -> DoctorCheck:
    """GPUs TensorFlow can see, against an NVIDIA driver on the machine."""
    tf = _tf()
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        names = []
        for gpu in gpus:
            try:
                details = tf.config.experimental.get_device_details(gpu)
            except Exception:
                details = {}
            names.append(f"{gpu.name} ({details.get('device_name', 'GPU')})")
        return DoctorCheck("gpu", "ok", f"{len(gpus)} GPU(s) visible: {', '.join(names)}")
    if _nvidia_driver():
        return DoctorCheck(
            "gpu",
            "warning",
            "an NVIDIA driver is present but TensorFlow sees no GPU: training runs on the CPU",
            f"pip install 'tensorflow[and-cuda]=={tf.__version__}'; check CUDA_VISIBLE_DEVICES",
        )
    return DoctorCheck("gpu", "ok", "no GPU (no NVIDIA driver): training runs on the CPU")


def check_cuda_build() -> DoctorCheck:
    """CUDA/cuDNN versions TensorFlow was built with (`tf.sysconfig.get_build_info()`)."""
    info = dict(_tf().sysconfig.get_build_info())
    if info.get("is_cuda_build"):
        caps = ", ".join(info.get("cuda_compute_capabilities", []))
        detail = (
            f"built with CUDA {info.get('cuda_version', '?')} and cuDNN "
            f"{info.get('cudnn_version', '?')} (compute capabilities {caps})"
        )
    elif info.get("is_rocm_build"):
        detail = f"built with ROCm {info.get('rocm_version', '?')}"
    else:
        detail = "a CPU-only build (no CUDA)"
    return DoctorCheck("cuda_build", "ok", detail)


def check_memory_growth() -> DoctorCheck:
    """Whether each GPU grows its memory on demand instead of taking it all."""
    tf = _tf()
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return DoctorCheck("memory_growth", "ok", "not applicable: no GPU")
    if os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH", "").lower() == "true":
        return DoctorCheck(
            "memory_growth", "ok", "on for every GPU (TF_FORCE_GPU_ALLOW_GROWTH=true)"
        )
    off = [g.name for g in gpus if not tf.config.experimental.get_memory_growth(g)]
    if off:
        return DoctorCheck(
            "memory_growth",
            "warning",
            f"off for {', '.join(off)}: TensorFlow reserves almost all GPU memory at the first op",
            "call tfguard.doctor.enable_memory_growth() before any op, or set "
            "TF_FORCE_GPU_ALLOW_GROWTH=true",
        )
    return DoctorCheck("memory_growth", "ok", f"on for {len(gpus)} GPU(s)")


def enable_memory_growth() -> list[str]:
    """Turns on memory growth for every visible GPU.

    Must run before TensorFlow initializes its devices (before the first op).

    Example:

    >>> import tensorflow as tf
    >>> gpus = [g.name for g in tf.config.list_physical_devices("GPU")]
    >>> try:  # the GPUs it changed (none without GPU), unless TensorFlow already ran an op
    ...     enable_memory_growth() == gpus
    ... except ContractError as e:
    ...     "before TensorFlow initialized its devices" in str(e)
    True

    Returns:
        The names of the GPUs changed (empty without GPU).

    Raises:
        ContractError: the devices were already initialized.
    """
    tf = _tf()
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError as e:
            raise ContractError(
                f"Could not enable memory growth on {gpu.name}: {e}. Expected to run before "
                "TensorFlow initialized its devices.",
                hint="call enable_memory_growth() first thing, or set TF_FORCE_GPU_ALLOW_GROWTH=true.",
            ) from e
    return [g.name for g in gpus]


# -- XLA ------------------------------------------------------------------------------


def keras_uses_xla() -> bool:
    """Whether Keras resolves `jit_compile="auto"` to XLA on this machine.

    Compiles a one-layer model with `jit_compile="auto"` and reads back the
    resolved `model.jit_compile` (Keras picks XLA when a GPU is visible).

    Returns:
        `True` when Keras would train with XLA here.
    """
    import keras

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", jit_compile="auto")
    return bool(model.jit_compile)


def check_xla_auto() -> DoctorCheck:
    """What Keras's default `jit_compile="auto"` resolves to here."""
    if keras_uses_xla():
        return DoctorCheck(
            "xla_auto",
            "warning",
            'Keras compiles training with XLA here (jit_compile="auto" with a GPU): '
            "tf.debugging asserts in the train step compile to nothing",
            "rely on tfguard's checks (flags acted on by the host), not on tf.debugging "
            "asserts; or compile with jit_compile=False while debugging",
        )
    return DoctorCheck(
        "xla_auto",
        "ok",
        'Keras does not use XLA here (jit_compile="auto" on a CPU-only machine); it will on '
        "a machine with a GPU",
    )


@dataclasses.dataclass(frozen=True)
class AssertDemo:
    """What a failing `tf.debugging.assert_greater` did, eagerly and under XLA.

    Args:
        eager_raised: the eager call raised `InvalidArgumentError`.
        xla_raised: the `jit_compile=True` call raised.
        xla_output: what the XLA call returned, or `None`.
        xla_error: the XLA compile/run error text when it was not the assert.
    """

    eager_raised: bool
    xla_raised: bool
    xla_output: list[float] | None
    xla_error: str | None = None


def demonstrate_xla_asserts() -> AssertDemo:
    """Runs `assert_greater(x, 0)` with `x = -1` eagerly and under `jit_compile=True`.

    Returns:
        An `AssertDemo` with what really happened on this machine.
    """
    tf = _tf()

    def double_positive(x):
        tf.debugging.assert_greater(x, tf.constant(0.0), message="x must be positive")
        return x * 2.0

    x = tf.constant([-1.0])
    try:
        double_positive(x)
        eager_raised = False
    except tf.errors.InvalidArgumentError:
        eager_raised = True
    try:
        out = tf.function(double_positive, jit_compile=True)(x)
        return AssertDemo(eager_raised, False, [float(v) for v in out.numpy()])
    except tf.errors.InvalidArgumentError as e:
        message = str(e)
        if "x must be positive" in message:
            return AssertDemo(eager_raised, True, None)
        return AssertDemo(eager_raised, True, None, message.splitlines()[0][:200])
    except Exception as e:  # XLA unavailable in this build
        return AssertDemo(eager_raised, True, None, f"{type(e).__name__}: {str(e)[:200]}")


def check_xla_asserts(uses_xla: bool | None = None) -> DoctorCheck:
    """Demonstrates, for real, that XLA drops `tf.debugging` asserts.

    Args:
        uses_xla: whether Keras trains with XLA here, or `None` to find out.
            Defaults to `None`.
    """
    demo = demonstrate_xla_asserts()
    uses_xla = keras_uses_xla() if uses_xla is None else uses_xla
    if demo.xla_error is not None:
        return DoctorCheck(
            "xla_asserts",
            "warning",
            f"XLA could not compile a tiny function here: {demo.xla_error}",
        )
    eager = "raised InvalidArgumentError" if demo.eager_raised else "did NOT raise"
    if demo.xla_raised:
        return DoctorCheck(
            "xla_asserts",
            "ok",
            f"tf.debugging.assert_greater(x, 0) with x=[-1.0]: eagerly it {eager}; under "
            "tf.function(jit_compile=True) it raised too: asserts are kept by XLA here",
        )
    detail = (
        f"tf.debugging.assert_greater(x, 0) with x=[-1.0]: eagerly it {eager}; under "
        f"tf.function(jit_compile=True) it returned {demo.xla_output} without error: "
        "tf.debugging asserts compile to nothing under XLA"
    )
    if uses_xla:
        return DoctorCheck(
            "xla_asserts",
            "warning",
            detail + ", and Keras trains with XLA here",
            "use tfguard's checks (tensor flags) in training; keep asserts for eager code",
        )
    return DoctorCheck("xla_asserts", "ok", detail + " (Keras does not use XLA here)")


def check_profile_plugin() -> DoctorCheck:
    """The TensorBoard profile plugin (the Profile tab) is installed."""
    version = _dist_version("tensorboard-plugin-profile") or _dist_version(
        "tensorboard_plugin_profile"
    )
    if version is None and importlib.util.find_spec("tensorboard_plugin_profile") is None:
        return DoctorCheck(
            "profile_plugin",
            "warning",
            "tensorboard_plugin_profile is not installed: TensorBoard's Profile tab stays empty "
            "and traces from the Keras TensorBoard callback (profile_batch) cannot be viewed",
            "pip install tensorboard-plugin-profile",
        )
    return DoctorCheck(
        "profile_plugin", "ok", f"tensorboard_plugin_profile {version or ''}".strip()
    )


# -- the report -----------------------------------------------------------------------

TF_CHECKS: tuple[Callable[[], DoctorCheck], ...] = (
    check_keras,
    check_versions,
    check_tensorboard,
    check_legacy_keras,
    check_gpu,
    check_cuda_build,
    check_memory_growth,
)


def run_doctor(*, xla_demo: bool = True) -> list[DoctorCheck]:
    """Checks this environment, one `DoctorCheck` per line.

    Lines, in order: `python`, `tensorflow`, `keras`, `versions`, `tensorboard`,
    `legacy_keras`, `gpu`, `cuda_build`, `memory_growth`, `xla_auto`,
    `xla_asserts`, `profile_plugin`. Without an importable TensorFlow, the
    TensorFlow-dependent lines are skipped.

    Args:
        xla_demo: compile the tiny XLA function for the `xla_asserts` line
            (this initializes TensorFlow's devices). Defaults to `True`.

    Returns:
        The list of checks.
    """
    checks = [check_python(), check_tensorflow()]
    if checks[-1].status == "problem":
        return [*checks, check_profile_plugin()]
    for check in TF_CHECKS:
        try:
            checks.append(check())
        except Exception as e:  # a doctor reports, it does not crash
            checks.append(
                DoctorCheck(
                    check.__name__.removeprefix("check_"),
                    "problem",
                    f"the check itself failed: {type(e).__name__}: {e}",
                )
            )
    keras_ok = checks[2].status != "problem"
    if keras_ok:
        xla = check_xla_auto()
        checks.append(xla)
        if xla_demo:
            checks.append(check_xla_asserts(uses_xla=xla.status == "warning"))
    checks.append(check_profile_plugin())
    return checks


def doctor_exit_code(checks: list[DoctorCheck]) -> int:
    """`1` if any check is a problem, else `0` (warnings do not fail)."""
    return 1 if any(c.status == "problem" for c in checks) else 0


def doctor_json(checks: list[DoctorCheck]) -> str:
    """The checks as JSON text: `{"checks": [...], "summary": {...}, "exit_code": n}`."""
    summary = {s: sum(c.status == s for c in checks) for s in STATUSES}
    return json.dumps(
        {
            "checks": [dataclasses.asdict(c) for c in checks],
            "summary": summary,
            "exit_code": doctor_exit_code(checks),
        },
        indent=2,
    )


def render_doctor(checks: list[DoctorCheck], console) -> None:
    """Prints the checks as a table to a `rich.console.Console`.

    Args:
        checks: what `run_doctor` returned.
        console: a `rich.console.Console`.
    """
    from rich.table import Table

    style = {"ok": "green", "warning": "yellow", "problem": "red"}
    table = Table(title="tfguard doctor")
    for col in ("check", "status", "detail", "fix"):
        table.add_column(col, overflow="fold")
    for c in checks:
        table.add_row(
            c.name, f"[{style[c.status]}]{c.status}[/{style[c.status]}]", c.detail, c.fix or ""
        )
    console.print(table)
    summary = ", ".join(f"{sum(c.status == s for c in checks)} {s}" for s in STATUSES)
    console.print(summary)
