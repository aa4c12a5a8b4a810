"""AUTOTRAINER's Improper_Activation_case demo (Blob data), fixed version.

Ported from shiningrain/AUTOTRAINER AutoTrainer/demo_case/Improper_Activation_case/demo_activation.py.
AUTOTRAINER's monitor and repair loop (model_train(..., autorepair=True)) is left out: the program
trains the model as the configuration says. The fix is AUTOTRAINER's repair for an improper
activation ('activation_1'): a softmax output, as the demo's commented-out Softmax() line.
"""
import keras
import keras.optimizers as O
from keras.layers import Dense, Input
from keras.models import Sequential
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


# #Initialize
model = Sequential()
model.add(Input(shape=(2,)))  # PORT: input_dim= on the first layer -> an Input
model.add(Dense(50, activation='relu', kernel_initializer='he_uniform'))
model.add(Dense(50, activation='relu', kernel_initializer='he_uniform'))
model.add(Dense(50, activation='relu', kernel_initializer='he_uniform'))
model.add(Dense(50, activation='relu', kernel_initializer='he_uniform'))
model.add(Dense(3, activation='softmax'))
# PORT: model.save / load_model round trip through model_acti.h5 and config_acti.pkl left out.
training_config = {}
training_config['optimizer'] = 'Adam'
training_config['opt_kwargs'] = {'learning_rate': 0.0001}  # PORT: 'lr' -> 'learning_rate'
training_config['batchsize'] = 256
training_config['epoch'] = 300
training_config['dataset'] = 'simplednn_blob'
training_config['loss'] = 'categorical_crossentropy'  # 'mean_squared_error'
opt_cls = getattr(O, training_config['optimizer'])
opt = opt_cls(**training_config['opt_kwargs'])
batch_size = training_config['batchsize']
epoch = 100  # PORT: training_config['epoch'] (300) -> 100, as AUTOTRAINER's reproduce.py
loss = training_config['loss']
(x, y), (x_val, y_val) = load_data()
x, x_val = preprocess(x), preprocess(x_val)

model.compile(optimizer=opt, loss=loss, metrics=["accuracy"])
history = model.fit(x, y, batch_size=batch_size, epochs=epoch, validation_data=(x_val, y_val), verbose=0)
print("accuracy", history.history["accuracy"][-1], "val_accuracy", history.history["val_accuracy"][-1])
