import json

import keras
import numpy as np
import pytest

from tfguard._errors import ContractError
from tfguard.reference import TrainConfig, load_config, train


def tiny(tmp_path, **kw):
    base = {"model": "mlp", "epochs": 1, "max_samples": 200, "logdir": str(tmp_path / "runs")}
    return TrainConfig(**{**base, **kw})


# -- config ----------------------------------------------------------------------------


def test_invalid_values_are_reported_keras_style():
    with pytest.raises(
        ContractError,
        match="^Received an invalid value for `batch_size`, expected a positive integer. "
        "Received: batch_size=0$",
    ):
        TrainConfig(batch_size=0)
    with pytest.raises(ContractError, match="Received: learning_rate=-1"):
        TrainConfig(learning_rate=-1)
    with pytest.raises(ContractError, match="Received: augment='yes'"):
        TrainConfig(augment="yes")
    with pytest.raises(ContractError, match="Received: val_fraction=1"):
        TrainConfig(val_fraction=1)


def test_hparams_and_run_dir():
    config = TrainConfig(learning_rate=0.01, batch_size=32, optimizer="sgd", augment=True, seed=3)
    assert config.hparams() == {
        "model": "cnn",
        "optimizer": "sgd",
        "learning_rate": 0.01,
        "batch_size": 32,
        "augment": True,
    }
    assert str(config.run_dir()) == "runs/digits-cnn-sgd-lr0.01-bs32-aug1-s3"
    assert TrainConfig(data="npz:/d/my.npz").run_dir().name.startswith("npz-my-cnn-")
    assert TrainConfig(run_name="x").run_dir().name == "x"


def test_load_config_from_toml_with_overrides(tmp_path):
    path = tmp_path / "train.toml"
    path.write_text('[train]\nepochs = 3\nlearning_rate = 1\nmodel = "mlp"\naugment = true\n')
    config = load_config(path, epochs=5, batch_size=None)
    assert (config.epochs, config.learning_rate, config.model, config.augment) == (
        5,
        1.0,
        "mlp",
        True,
    )
    assert config.batch_size == 64  # None means "flag not given"
    flat = tmp_path / "flat.toml"
    flat.write_text("batch_size = 16\n")
    assert load_config(flat).batch_size == 16
    assert load_config(None, seed=7).seed == 7


def test_load_config_errors(tmp_path):
    bad_key = tmp_path / "k.toml"
    bad_key.write_text("epocs = 3\n")
    with pytest.raises(ContractError, match="unknown config.*'epocs'"):
        load_config(bad_key)
    bad_toml = tmp_path / "t.toml"
    bad_toml.write_text("epochs = \n")
    with pytest.raises(ContractError, match="not valid TOML"):
        load_config(bad_toml)
    with pytest.raises(ContractError, match="does not exist"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(ContractError, match="Received: epochs=0"):
        load_config(None, epochs=0)
    with pytest.raises(ContractError, match="unknown override"):
        load_config(None, lr=0.1)


# -- training --------------------------------------------------------------------------


class Recorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append(epoch)


def test_train_writes_a_run_and_uses_the_seams(tmp_path):
    recorder, lines, wrapped, loaded = Recorder(), [], [], []

    def wrap(model):
        wrapped.append((model.compiled, type(model.optimizer).__name__))
        return model

    result = train(
        tiny(tmp_path, epochs=2, augment=True),
        callbacks=[recorder],
        progress=lines.append,
        wrap_model=wrap,
        on_data=loaded.append,
    )
    assert wrapped == [(True, "Adam")]
    (data,) = loaded  # the data training used, handed over once
    assert data.info.name == "digits" and len(data.x_train) == len(data.x_test) == 200
    assert recorder.epochs == [0, 1] and result.epochs == [0, 1] and result.initial_epoch == 0
    assert set(result.history) >= {"loss", "accuracy", "val_loss", "val_accuracy", "learning_rate"}
    assert np.isfinite(result.test_metrics["loss"]) and 0 <= result.test_metrics["accuracy"] <= 1
    assert result.run_dir.name == "digits-mlp-adam-lr0.001-bs64-aug1-s0"
    assert (result.run_dir / "model.keras").is_file()
    assert json.loads((result.run_dir / "dataset.json").read_text())["value_range"] == [0, 255]
    assert not (result.run_dir / "backup").exists()  # removed after a finished run
    assert lines[0].startswith("data digits: 200 train, 200 test")
    assert any(line.startswith("epoch 2/2") for line in lines)
    assert result.model is result.fitted


def test_wrap_model_must_return_a_model(tmp_path):
    with pytest.raises(ContractError, match="expected a keras.Model. Received: str"):
        train(tiny(tmp_path), wrap_model=lambda m: "guarded")


class Interrupt(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        if epoch == 0:
            raise KeyboardInterrupt("simulated interruption after epoch 1")


def test_interrupted_run_resumes_at_epoch_2(tmp_path):
    config = tiny(tmp_path, epochs=3, patience=5)
    with pytest.raises(KeyboardInterrupt):
        train(config, callbacks=[Interrupt()])
    backup = config.run_dir() / "backup"
    assert json.loads((backup / "training_metadata.json").read_text())["epoch"] == 1
    recorder, lines = Recorder(), []
    result = train(config, callbacks=[recorder], progress=lines.append)
    assert result.initial_epoch == 1 and result.epochs == [1, 2] and recorder.epochs == [1, 2]
    assert "resuming from the backup at epoch 2/3" in lines
    assert not backup.exists()


def test_early_stopping_ends_a_diverging_run(tmp_path):
    config = tiny(tmp_path, epochs=8, optimizer="sgd", learning_rate=1e4, patience=1, lr_patience=5)
    result = train(config)
    assert result.stopped_early and len(result.epochs) < 8
