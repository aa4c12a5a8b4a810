"""The TensorBoard MNIST demo (Stack Overflow question 43239467), fixed version.

Ported from TensorFlow-Program-Bugs StackOverflow/IPS-11/43239467-fix/mnist.py.
"""
import keras
import numpy as np
from keras import layers
from sklearn.datasets import load_digits

keras.utils.set_random_seed(20180130)

# PORT: MNIST download -> sklearn's 8x8 digits, each pixel repeated 3x3 and padded to 28x28 (784
# features), scaled so that the mean squared norm of an image is MNIST's (88); one-hot labels.
digits = load_digits()
x_train = np.pad(np.kron(digits.images / 16.0, np.ones((3, 3))), ((0, 0), (2, 2), (2, 2))).reshape(-1, 784)
x_train = (x_train * np.sqrt(88.0 / (x_train ** 2).sum(axis=1).mean())).astype("float32")
y_train = keras.utils.to_categorical(digits.target, 10)


def conv_layer(size_out, name="conv"):
    # PORT: conv2d + relu + max_pool with truncated_normal(0.1) weights and 0.1 biases as Keras layers.
    return [layers.Conv2D(size_out, 5, padding="same", activation="relu", name=name,
                          kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.1),
                          bias_initializer=keras.initializers.Constant(0.1)),
            layers.MaxPooling2D(2, padding="same")]


def fc_layer(size_out, name="fc", activation="relu"):
    return layers.Dense(size_out, activation=activation, name=name,
                        kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.1),
                        bias_initializer=keras.initializers.Constant(0.1))


model = keras.Sequential([
    keras.Input(shape=(784,)),
    layers.Reshape((28, 28, 1)),
    *conv_layer(32, "conv1"),
    *conv_layer(64, "conv2"),
    layers.Flatten(),
    fc_layer(1024, "fc1"),
    fc_layer(10, "fc2", activation=None),
])
# xent = mean(softmax_cross_entropy_with_logits(logits, labels))
model.compile(optimizer=keras.optimizers.Adam(1e-3),
              loss=keras.losses.CategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
# PORT: 2000 steps of mnist.train.next_batch(100) -> 3 epochs of 18 steps.
history = model.fit(x_train, y_train, batch_size=100, epochs=3, verbose=0)
print("accuracy", [round(a, 3) for a in history.history["accuracy"]])
