"""AUTOTRAINER benchmark model tmp_lenet5 (MNIST), fixed version.

Ported from DeepDiagnosis/ICSE2022, AUTOTRAINER Model Code/Models_MNIST.py, get_model('tmp_lenet5'), repaired as AUTOTRAINER
repairs its problem: strategy relu_1 (op_relu: ReLU activations, 'he_uniform' kernels) on every layer but the last
(AUTOTRAINER AutoTrainer/utils/repair.py).
"""
import keras
import numpy as np
from keras import initializers
from sklearn.datasets import load_digits

keras.utils.set_random_seed(5)  # PORT: the published code sets no seed


# PORT: AUTOTRAINER's MNIST (keras.datasets.mnist, min-max scaled to [0, 1], one-hot) -> sklearn's
# 8x8 digits, each pixel repeated 3x3 and padded to 28x28, in [0, 1]; 1,500 for training, the rest
# for validation.
def load_data():
    digits = load_digits()
    x = np.pad(np.kron(digits.images / 16.0, np.ones((3, 3))), ((0, 0), (2, 2), (2, 2)))[..., None]
    y = keras.utils.to_categorical(digits.target, 10)
    return (x[:1500], y[:1500]), (x[1500:], y[1500:])


def preprocess(x):
    return x.astype("float32")


def get_model():
    model = keras.Sequential()
    model.add(keras.layers.Conv2D(filters=32, input_shape=(28,28,1), kernel_size=(5, 5),strides=(1, 1), padding="valid", data_format='channels_last',  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.MaxPooling2D(pool_size=(2, 2), strides=(2, 2), padding="valid", data_format='channels_last'))
    model.add(keras.layers.Conv2D(filters=64, kernel_size=(5, 5),strides=(1, 1), padding="valid", data_format='channels_last',  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Flatten(data_format = 'channels_last'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=64,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=32,  kernel_initializer = 'he_uniform'))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=10, kernel_initializer = initializers.RandomUniform()))
    model.add(keras.layers.Activation('softmax'))
    return model


(x, y), (x_val, y_val) = load_data()
x, x_val = preprocess(x), preprocess(x_val)
model = get_model()
# PORT: the published model code carries no training configuration: AUTOTRAINER's MNIST motivation
# case (Motivation/DyingReLU/train.py) is used: Adam(), categorical_crossentropy, batch 32; its
# 50 epochs -> 5.
model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
history = model.fit(x, y, batch_size=32, epochs=5, validation_data=(x_val, y_val), verbose=0)
print("accuracy", history.history["accuracy"][-1], "val_accuracy", history.history["val_accuracy"][-1])
