"""AUTOTRAINER's Gradient_Vanish_Case demo (Circle data), buggy version.

Ported from shiningrain/AUTOTRAINER AutoTrainer/demo_case/Gradient_Vanish_Case (demo.py, model.h5,
config.pkl). AUTOTRAINER's monitor and repair loop (model_train(..., autorepair=True)) is left out:
the program trains the model as the configuration says.
"""
import keras
import keras.optimizers as O
from keras import initializers
from sklearn.datasets import make_circles

keras.utils.set_random_seed(1)  # PORT: the demo sets no seed


# AUTOTRAINER's Circle data (AutoTrainer/data/simplednn.py, method='circle'), from sklearn.
def load_data():
    X, y = make_circles(n_samples=1000, noise=0.1, random_state=1)
    X = X * 100
    n_train = 700
    x, x_val = X[:n_train, :], X[n_train:, :]
    y, y_val = y[:n_train], y[n_train:]
    return (x, y), (x_val, y_val)


def preprocess(x):
    return x / 100


# PORT: load_model('./model.h5') -> the model the file holds (its model_config), rebuilt layer by layer.
def load_model():
    init = initializers.VarianceScaling(scale=2.0, mode="fan_in", distribution="uniform")
    model = keras.Sequential([keras.Input(shape=(2,))])
    for _ in range(8):
        model.add(keras.layers.Dense(5, activation="sigmoid", kernel_initializer=init))
    model.add(keras.layers.Dense(1, activation="sigmoid", kernel_initializer=init))
    return model


# PORT: pickle.load(open('./config.pkl')) -> the dictionary the file holds.
training_config = {"batchsize": 128, "dataset": "simplednn_circle", "epoch": 300,
                   "loss": "binary_crossentropy", "opt_kwargs": {"learning_rate": 0.001}, "optimizer": "Adam"}
opt_cls = getattr(O, training_config["optimizer"])
opt = opt_cls(**training_config["opt_kwargs"])  # PORT: opt_kwargs 'lr' -> 'learning_rate'
batch_size = training_config["batchsize"]
epoch = 100  # PORT: training_config['epoch'] (300) -> 100, as AUTOTRAINER's reproduce.py
loss = training_config["loss"]
(x, y), (x_val, y_val) = load_data()
x, x_val = preprocess(x), preprocess(x_val)

model = load_model()
model.compile(optimizer=opt, loss=loss, metrics=["accuracy"])
history = model.fit(x, y, batch_size=batch_size, epochs=epoch, validation_data=(x_val, y_val), verbose=0)
print("accuracy", history.history["accuracy"][-1], "val_accuracy", history.history["val_accuracy"][-1])
