"""AUTOTRAINER's dying-ReLU motivation case (a 34-layer ReLU MLP on MNIST), buggy version.

Ported from shiningrain/AUTOTRAINER Motivation/DyingReLU (train.py, minist_relu_layer=34.h5).
AUTOTRAINER reports that this model dies in half of its trainings; the seed below is one that dies.
"""
import keras
import numpy as np
from sklearn.datasets import load_digits

keras.utils.set_random_seed(1)  # PORT: the original sets no seed; seed 1 dies (4 of 6 seeds tried did)


def minist_load_data():
    # PORT: mnist.load_data() -> sklearn's 8x8 digits, each pixel repeated 3x3 and padded to 28x28,
    # flattened to 784 values in [0, 1]; 1,500 for training, the rest as test data.
    digits = load_digits()
    x = np.pad(np.kron(digits.images / 16.0, np.ones((3, 3))), ((0, 0), (2, 2), (2, 2)))
    x = x.reshape(len(x), 784).astype('float32')
    y = keras.utils.to_categorical(digits.target, 10)
    return (x[:1500], y[:1500]), (x[1500:], y[1500:])


# PORT: load_model("minist_relu_layer=34.h5") -> the model the file holds (its model_config):
# 33 x (Dense(128), Activation('relu')) and Dense(10, softmax), glorot_uniform kernels.
def load_model():
    model = keras.Sequential([keras.Input(shape=(784,))])
    for _ in range(33):
        model.add(keras.layers.Dense(128))
        model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(10, activation='softmax'))
    return model


(x_train, y_train), (x_test, y_test) = minist_load_data()
epochs = 4  # PORT: 50 -> 4
opt = 'adam'
# PORT: the loop of train_num=100 trainings -> one training.
model = load_model()
model.compile(loss='categorical_crossentropy', optimizer=opt, metrics=['accuracy'])
history = model.fit(x_train, y_train, batch_size=32, epochs=epochs, verbose=0, validation_data=(x_test, y_test))
print("accuracy", [round(a, 3) for a in history.history["accuracy"]])
