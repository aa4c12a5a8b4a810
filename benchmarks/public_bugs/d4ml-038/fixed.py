"""A super basic Keras model (NikhilM98/learning-deeplearning super_basic_1.py), fixed version.

Ported from defects4ml bugs/038 (fixed: NikhilM98/learning-deeplearning at eb24906).
"""
import random
from random import randint

import keras
import numpy as np
from keras.layers import Dense, Input  # PORT: keras.layers.core -> keras.layers
from keras.models import Sequential
from keras.optimizers import Adam
from sklearn.preprocessing import MinMaxScaler

keras.utils.set_random_seed(38)  # PORT: the original sets no seed (this seeds Python's random too)
random.seed(38)

# -> Start creating sample data

train_labels = []
train_samples = []

for i in range(50):
    random_younger = randint(13, 64)
    train_samples.append(random_younger)
    train_labels.append(1)

    random_older = randint(65, 100)
    train_samples.append(random_older)
    train_labels.append(0)

for i in range(1000):
    random_younger = randint(13, 64)
    train_samples.append(random_younger)
    train_labels.append(0)

    random_older = randint(65, 100)
    train_samples.append(random_older)
    train_labels.append(1)

# -> Preprocessing

train_labels = np.array(train_labels)
train_samples = np.array(train_samples)

scaler = MinMaxScaler(feature_range=(0, 1))
scaled_train_samples = scaler.fit_transform((train_samples).reshape(-1, 1))

# -> End creating sample data

model = Sequential([
    Input(shape=(1,)),  # PORT: input_shape= on the first layer -> an Input
    Dense(16, activation='relu'),
    Dense(32, activation='relu'),
    Dense(2, activation='softmax')
])

model.compile(Adam(learning_rate=0.0001), loss='sparse_categorical_crossentropy', metrics=['accuracy'])  # PORT: lr -> learning_rate

# model.loss='sparse_categorical_crossentropy'
# model.loss

# PORT: verbose=2 -> 0; epochs 20 -> 10.
history = model.fit(scaled_train_samples, train_labels, validation_split=0.1, batch_size=10, epochs=10, shuffle=True, verbose=0)
print("accuracy", [round(a, 3) for a in history.history["accuracy"]])
