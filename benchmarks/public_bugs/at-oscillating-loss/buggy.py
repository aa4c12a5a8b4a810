"""AUTOTRAINER's Oscillating_Loss_Case demo (Blob data), buggy version.

Ported from shiningrain/AUTOTRAINER AutoTrainer/demo_case/Oscillating_Loss_Case (demo.py, model.h5,
config.pkl). AUTOTRAINER's monitor and repair loop (model_train(..., autorepair=True)) is left out:
the program trains the model as the configuration says.
"""
import keras
import keras.optimizers as O
from keras import initializers
from sklearn.datasets import make_blobs

keras.utils.set_random_seed(1)  # PORT: the demo sets no seed


# AUTOTRAINER's Blob data (AutoTrainer/data/simplednn.py, method='blob'), from sklearn.
def load_data():
    X, y = make_blobs(n_samples=1000, centers=3, n_features=2, cluster_std=2, random_state=2)
    X = X * 100
    y = keras.utils.to_categorical(y)
    n_train = 700
    x, x_val = X[:n_train, :], X[n_train:, :]
    y, y_val = y[:n_train], y[n_train:]
    return (x, y), (x_val, y_val)


def preprocess(x):
    return x / 100


# PORT: load_model('./model.h5') -> the model the file holds (its model_config), rebuilt layer by layer.
def load_model():
    model = keras.Sequential([keras.Input(shape=(2,))])
    model.add(keras.layers.Dense(50, activation="relu", kernel_initializer=initializers.VarianceScaling(
        scale=2.0, mode="fan_in", distribution="uniform")))
    model.add(keras.layers.Dense(3, activation="softmax", kernel_initializer=initializers.VarianceScaling(
        scale=1.0, mode="fan_avg", distribution="uniform")))
    return model


# PORT: pickle.load(open('./config.pkl')) -> the dictionary the file holds.
training_config = {"batchsize": 1, "epoch": 200, "dataset": "simplednn_blob", "loss": "categorical_crossentropy",
                   "opt_kwargs": {"learning_rate": 0.01, "momentum": 0.9}, "optimizer": "SGD"}
opt_cls = getattr(O, training_config["optimizer"])
opt = opt_cls(**training_config["opt_kwargs"])  # PORT: opt_kwargs 'lr' -> 'learning_rate'
batch_size = training_config["batchsize"]
epoch = 12  # PORT: training_config['epoch'] (200 epochs of 700 steps) -> 12 (8,400 steps)
loss = training_config["loss"]
(x, y), (x_val, y_val) = load_data()
x, x_val = preprocess(x), preprocess(x_val)

model = load_model()
model.compile(optimizer=opt, loss=loss, metrics=["accuracy"])
history = model.fit(x, y, batch_size=batch_size, epochs=epoch, validation_data=(x_val, y_val), verbose=0)
print("loss", [round(v, 3) for v in history.history["loss"]], "val_accuracy", history.history["val_accuracy"])
