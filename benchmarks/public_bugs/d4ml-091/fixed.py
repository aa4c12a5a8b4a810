"""Five-class CNN trained on class-sorted data with validation_split (Stack Overflow question 56103207), fixed version.

Ported from defects4ml bugs/091/fixed/script.py.
"""
import keras
import numpy as np
from keras.layers import Conv2D, Dense, Flatten, Input, MaxPooling2D
from keras.models import Sequential
from sklearn.datasets import load_digits

keras.utils.set_random_seed(56103207)  # PORT: the original sets no seed
np.random.seed(56103207)

model = Sequential()

model.add(Input(shape=(28, 28, 1)))  # PORT: input_shape= on the first layer -> an Input
model.add(Conv2D(filters=32, kernel_size=5, data_format="channels_last", activation="relu"))
model.add(MaxPooling2D(data_format="channels_last"))
model.add(Conv2D(filters=16, kernel_size=3, data_format="channels_last", activation="relu"))
model.add(MaxPooling2D(data_format="channels_last"))

model.add(Flatten(data_format="channels_last"))

model.add(Dense(units=128, activation="relu"))
model.add(Dense(units=64, activation="relu"))
model.add(Dense(units=5, activation="softmax"))

model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])

# PORT: ./data/x.npy, y.npy (60,000 28x28 images of 5 classes, stored sorted by class: 12,000 of
# class 0, then 12,000 of class 1, ...) -> the 5 first classes of sklearn's 8x8 digits, each pixel
# repeated 3x3 and padded to 28x28, in [0, 1], stored sorted by class in the same way.
digits = load_digits()
keep = digits.target < 5
order = np.argsort(digits.target[keep], kind="stable")
x = np.pad(np.kron(digits.images[keep][order] / 16.0, np.ones((3, 3))), ((0, 0), (2, 2), (2, 2)))[..., None].astype("float32")
y = keras.utils.to_categorical(digits.target[keep][order], 5)
# Shuffle the data!
p = np.random.permutation(len(x))
x = x[p]
y = y[p]

# PORT: epochs=20 -> 8.
history = model.fit(x=x, y=y, batch_size=100, epochs=8, validation_split=0.2, verbose=0)
print("accuracy", history.history["accuracy"][-1], "val_accuracy", history.history["val_accuracy"][-1])
