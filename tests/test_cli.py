import io
import json
import os

import keras
import numpy as np
import pytest
from rich.console import Console

import tfguard
from tfguard._cli import main


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


# -- text from files and names is shown literally -----------------------------------------------


def _quarantine(tmp_path) -> str:
    """A real quarantine folder of a NaN batch (a plain Dense model)."""
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, name="dense")])
    model.compile(optimizer="sgd", loss="mse")
    tfguard.guard(model, quarantine_dir=str(tmp_path / "q"), localize=False)
    x = np.ones((4, 2), np.float32)
    x[1, 1] = np.nan
    with pytest.raises(tfguard.GuardViolation) as info:
        model.fit(x, np.zeros((4, 1)), verbose=0)
    return info.value.quarantine


def test_replay_shows_a_crafted_save_error_escaped(tmp_path, capsys):
    folder = _quarantine(tmp_path)
    meta_path = os.path.join(folder, "meta.json")
    with open(meta_path, encoding="utf-8") as f:
        meta = json.load(f)
    meta["model"].update(file=None, save_error="\x1b]0;TITLE\x07\x1b[2J [bold]boom[/] [link=x]y")
    with open(meta_path, "w", encoding="utf-8") as f:
        json.dump(meta, f)
    for extra in ("replay.json", "model.keras"):
        if os.path.exists(os.path.join(folder, extra)):
            os.remove(os.path.join(folder, extra))
    capsys.readouterr()
    status = main(["replay", folder])
    captured = capsys.readouterr()
    assert status == 2
    assert "\x1b" not in captured.err + captured.out and "\x07" not in captured.err + captured.out
    assert "\\x1b]0;TITLE\\x07\\x1b[2J [bold]boom[/] [link=x]y" in captured.err
    assert "Traceback" not in captured.err


def test_lint_of_a_path_with_markup_is_one_error_line(tmp_path, capsys):
    status = main(["lint", str(tmp_path / "no[/]pe.keras")])
    err = capsys.readouterr().err
    assert status != 0 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("ERROR") and lines[1].startswith("hint:")
    assert "no[/]pe.keras" in lines[0]


def test_lint_rendering_shows_names_literally():
    from tfguard._findings import Finding
    from tfguard.lint import render_lint

    finding = Finding("loss_activation_mismatch", "error", "layer '[bold]x[/]\x1b[2J' is wrong",
                          "out\nlayer\x07", {"code": "c[/]"}, "rename [link=x]it[/link]")
    out = io.StringIO()
    render_lint([finding], Console(file=out, width=200, force_terminal=False))
    text = out.getvalue()
    assert "[bold]x[/]\\x1b[2J" in text and "out\\nlayer\\x07" in text and "c[/]" in text
    assert "[link=x]it[/link]" in text and "\x1b" not in text and "\x07" not in text
