import keras
import numpy as np
import pytest

import tfguard
from tfguard.cli import main


def test_replay_of_a_missing_folder_is_one_error_line_with_a_hint(tmp_path, capsys):
    status = main(["replay", str(tmp_path / "nope")])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("ERROR Received an invalid quarantine folder")
    assert "hint:" in err


def test_replay_prints_the_localization(tmp_path, capsys):
    inputs = keras.Input((2,))
    h = keras.layers.Lambda(lambda t: t / t[:, 1:2], name="ratio")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(1)(h))
    model.compile(optimizer="sgd", loss="mse")
    tfguard.guard(model, quarantine_dir=str(tmp_path), localize=False)
    x = np.ones((4, 2), np.float32)
    x[1, 1] = 0
    with pytest.raises(tfguard.GuardViolation) as info:
        model.fit(x, np.zeros((4, 1)), verbose=0)
    capsys.readouterr()
    # A Lambda layer is not loadable in safe mode: the replay says so, as one error line.
    assert main(["replay", info.value.quarantine]) == 2
    assert "ERROR" in capsys.readouterr().err


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert tfguard.__version__ in capsys.readouterr().out
    assert main([]) == 2


def test_lint_a_saved_model_reports_the_mismatch(tmp_path, capsys):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="relu")])
    model.compile(loss="sparse_categorical_crossentropy")
    path = tmp_path / "m.keras"
    model.save(path)
    status = main(["lint", str(path), "--json"])
    out = capsys.readouterr().out
    assert "loss_activation_mismatch" in out
    assert status == 1
