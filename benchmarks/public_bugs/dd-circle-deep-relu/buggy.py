"""AUTOTRAINER benchmark model model_8e28bdef (Circle), buggy version.

Ported from DeepDiagnosis/ICSE2022, AUTOTRAINER Model Code/Models_Circle.py, get_model('model_8e28bdef').
"""
import keras
from keras import initializers
from sklearn.datasets import make_circles

keras.utils.set_random_seed(3)  # PORT: the published code sets no seed


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


def get_model():
    model = keras.Sequential()
    model.add(keras.layers.Dense(units=5,  input_shape=(2, ), kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=5,  kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=5,  kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=5,  kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=5,  kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=5,  kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=5,  kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=5,  kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=5,  kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=5,  kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=5,  kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=5,  kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=5,  kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=5,  kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=5,  kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=5,  kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform')))
    model.add(keras.layers.Activation('relu'))
    model.add(keras.layers.Dense(units=1, kernel_initializer = initializers.VarianceScaling( scale=2.0, mode='fan_in', distribution='uniform'), bias_initializer = initializers.Zeros()))
    model.add(keras.layers.Activation('sigmoid'))
    return model


(x, y), (x_val, y_val) = load_data()
x, x_val = preprocess(x), preprocess(x_val)
model = get_model()
# PORT: the published model code carries no training configuration: AUTOTRAINER's Circle demo
# (demo_case/Gradient_Vanish_Case/config.pkl) is used: Adam(lr=0.001), binary_crossentropy, batch 128;
# its 300 epochs -> 40 (AUTOTRAINER's reproduce.py runs 100).
model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="binary_crossentropy", metrics=["accuracy"])
history = model.fit(x, y, batch_size=128, epochs=40, validation_data=(x_val, y_val), verbose=0)
print("accuracy", history.history["accuracy"][-1], "val_accuracy", history.history["val_accuracy"][-1])
