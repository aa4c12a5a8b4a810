"""AlexNet-style binary image classifier with a one-unit softmax (Stack Overflow question 58844149), buggy version.

Ported from defects4ml bugs/092/buggy/script.py.
"""
import keras
import numpy as np
from keras.models import Sequential

keras.utils.set_random_seed(58844149)  # PORT: the original sets no seed; numpy's global RNG seeded too
np.random.seed(58844149)

# PORT: 500 random 300x300 images -> 500 random 48x48 images (same value range), so that a CPU core
# trains it in seconds; the kernel sizes and strides are kept.
X_train = np.random.randint(0, 255, (500, 48, 48, 1)).astype("float32")
# np.empty([500, 300, 300,1])
y_train = np.random.randint(0, 1, (500, 1))

model = Sequential()
from keras.layers import Activation, Conv2D, Dense, Dropout, Flatten, Input, MaxPooling2D

model.add(Input(shape=(48, 48, 1)))  # PORT: input_shape= on the first layer -> an Input
model.add(Conv2D(96, kernel_size=11, padding="same", activation='relu'))
model.add(MaxPooling2D(pool_size=(3, 3), strides=(2, 2)))

model.add(Conv2D(128, kernel_size=3, padding="same", activation='relu'))
model.add(MaxPooling2D(pool_size=(2, 2), strides=(2, 2)))

model.add(Conv2D(128, kernel_size=3, padding="same", activation='relu'))
model.add(MaxPooling2D(pool_size=(2, 2), strides=(2, 2)))

# from keras.layers.core import Activation

model.add(Flatten())
# model.add(Dense(units=1000, activation='relu'  ))
model.add(Dense(units=300, activation='relu'))
model.add(Dropout(0.2))

model.add(Dense(1))
model.add(Activation("softmax"))

model.compile(loss='binary_crossentropy', optimizer='adam', metrics=['accuracy'])

# PORT: ImageDataGenerator(featurewise_center=True, rotation_range=90, fill_mode='nearest') is gone
# from Keras 3: the featurewise centering is done here, the random rotation by a RandomRotation
# layer in a tf.data pipeline (90 degrees = 0.25 of a turn).
import tensorflow as tf

X_train = X_train - X_train.mean(axis=0)
rotate = keras.layers.RandomRotation(0.25, fill_mode="nearest")
train_generator = (tf.data.Dataset.from_tensor_slices((X_train, y_train.astype("float32")))
                   .shuffle(500).batch(8).map(lambda x, y: (rotate(x, training=True), y)).repeat())

# fits the model on batches with real-time data augmentation:
# PORT: fit_generator(..., use_multiprocessing=True, workers=20) -> fit; 5 epochs of len/8 steps kept.
history = model.fit(train_generator,
                    steps_per_epoch=int(np.ceil(500 / 8) / 8),
                    epochs=5, verbose=0)
print("accuracy", history.history['accuracy'][-1])
