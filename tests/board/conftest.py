"""Fixtures of the TensorBoard tab's tests: one log directory of real runs, and a real TensorBoard.

`board_logdir` trains, once per session, the runs the tab must tell apart:
a healthy run and a buggy one (the diagnosis tests' programs, written by
tfguard's logger), a run of Keras's stock TensorBoard callback, a guarded
run whose firewall skipped NaN batches (quarantined, replayed), and a run
whose folder name and hparams hold HTML and script. `tensorboard` starts
the `tensorboard` command of the running interpreter's environment on it,
on 127.0.0.1 and a free port (`tests.summary.tensorboard_server.serve`).
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import json  # noqa: E402
import sys  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tests.summary.tensorboard_server import poll, serve  # noqa: E402

HOSTILE_RUN = "<img src=x onerror=\"document.title='pwned'\">"
HOSTILE_HPARAM = "<script>document.title='pwned'</script>"
RUNS = {"healthy": "healthy_digits", "buggy": "dead_relu", "stock": "stock_no_learning",
        "guarded": "guarded", "hostile": HOSTILE_RUN}


def _guarded_run(logdir: str, quarantine: str, name: str, hparams: dict) -> None:
    import keras

    from tfguard import Logger, guard

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 8)).astype("float32")
    y = (x[:, 0] + x[:, 1] > 0).astype("int64")
    x[[40, 170]] = np.nan  # batches 1 and 5 of each epoch (32 rows a batch)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu", name="hidden"),
                              keras.layers.Dense(2, activation="softmax", name="out")])
    model.compile(keras.optimizers.Adam(1e-2), "sparse_categorical_crossentropy", metrics=["accuracy"])
    model = guard(model, policy="skip", quarantine_dir=quarantine)
    logger = Logger(os.path.join(logdir, name), hparams=hparams, run_subdir=False, scalars_every=1)
    model.fit(x, y, batch_size=32, epochs=2, verbose=0, shuffle=False, callbacks=[logger])


@pytest.fixture(scope="session")
def board_logdir(tmp_path_factory):
    """The log directory (a str) holding the runs of `RUNS`."""
    from ..diagnose import programs

    root = tmp_path_factory.mktemp("board")
    logdir = str(root / "logs")
    by_name = {p.name: p for p in programs.PROGRAMS + programs.STOCK}
    for key in ("healthy", "buggy", "stock"):
        programs.run_program(by_name[RUNS[key]], logdir)
    _guarded_run(logdir, str(root / "quarantine"), RUNS["guarded"], {"lr": 0.01})
    _guarded_run(logdir, str(root / "quarantine-hostile"), HOSTILE_RUN, {"note": HOSTILE_HPARAM})
    return logdir


def get(url: str, timeout: float = 30):
    """`(status, body bytes, content type)` of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as error:
        return error.code, error.read(), error.headers.get("Content-Type", "")


def get_json(url: str):
    status, body, _ = get(url)
    assert status == 200, (url, status, body[:500])
    return json.loads(body)


@pytest.fixture(scope="session")
def tensorboard(board_logdir):
    """`http://127.0.0.1:PORT` of a real TensorBoard process serving `board_logdir`.

    It is the `tensorboard` command beside the running interpreter, so the
    tab comes from the installed package's entry point, as a user gets it.
    """
    from importlib.metadata import entry_points

    if "tfguard" not in {e.name for e in entry_points(group="tensorboard_plugins")}:
        pytest.fail("tfguard's `tensorboard_plugins` entry point is not installed in this environment "
                    f"({sys.prefix}); expected the package installed with its metadata. Run "
                    "`pip install --no-deps -e .` in the repository (`make test` does).")
    with serve(board_logdir) as base:
        poll(lambda: get(base + "/data/plugins_listing", timeout=5)[0] == 200, "its plugins listing")
        yield base
