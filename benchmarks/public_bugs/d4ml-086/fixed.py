"""Conv1D binary classifier with a one-unit softmax (Stack Overflow question 45378493), fixed version.

Ported from defects4ml bugs/086/fixed/script.py.
"""
import keras
import numpy as np
from keras.callbacks import ReduceLROnPlateau
from keras.layers import (
                 Activation,
                 BatchNormalization,
                 Conv1D,
                 Dense,
                 Dropout,
                 Flatten,
                 Input,
                 LeakyReLU,
)
from keras.models import Sequential

keras.utils.set_random_seed(45378493)  # PORT: the original sets no seed

# PORT: np.empty (uninitialized memory) -> standard normal values of the same shape.
rng = np.random.default_rng(45378493)
X_train = rng.normal(size=(6000, 10, 4)).astype("float32")
y_train = np.eye(6000, 1)

X_test = rng.normal(size=(1, 10, 4)).astype("float32")
y_test = np.array([1])

model = Sequential()
model.add(Input(shape=(10, 4)))  # PORT: input_shape= on the first layer -> an Input
model.add(Conv1D(filters=16,
                 kernel_size=4,
                 padding='same'))
model.add(BatchNormalization())
model.add(LeakyReLU())
model.add(Dropout(0.2))
model.add(Conv1D(filters=8,
                 kernel_size=4,
                 padding='same'))
model.add(BatchNormalization())
model.add(LeakyReLU())
model.add(Dropout(0.2))

model.add(Flatten())

model.add(Dense(64))
model.add(BatchNormalization())
model.add(LeakyReLU())

model.add(Dense(1))
model.add(Activation('sigmoid'))

reduce_lr = ReduceLROnPlateau(monitor='val_accuracy', factor=0.9, patience=30, min_lr=0.000001, verbose=0)

model.compile(optimizer='adam',
              loss='binary_crossentropy',
              metrics=['accuracy'])

# PORT: nb_epoch=100 -> epochs=5.
history = model.fit(X_train, y_train,
                    epochs=5,
                    batch_size=128,
                    verbose=0,
                    validation_data=(X_test, y_test),
                    callbacks=[reduce_lr],
                    shuffle=True)
print("loss", history.history['loss'][-1], "accuracy", history.history['accuracy'][-1])
y_pred = model.predict(X_test, verbose=0)
