"""Deep Belief Network finetuning from gabrieleangeletti/Deep-Learning-TensorFlow, buggy version.

Ported from defects4ml bugs/005/buggy (command_line/run_dbn.py, models/rbm_models/dbn.py, model.py).
The network's "softmax layer" is a linear layer (softmax_out = last_layer W + b) and the
'cross_entropy' cost treats its output as probabilities.
"""
import keras
import numpy as np
from keras import layers, ops
from sklearn.datasets import load_digits

keras.utils.set_random_seed(1)  # PORT: --seed -1 (none) -> 1

rbm_layers = [256]
finetune_act_func = "relu"
finetune_learning_rate = 0.01
finetune_num_epochs = 10
finetune_batch_size = 10
# PORT: --finetune_loss_func cross_entropy (the default 'mean_squared' is indifferent to the missing softmax).
finetune_loss_func = "cross_entropy"

# PORT: MNIST download -> sklearn's 8x8 digits, each pixel repeated 3x3 and padded to 28x28 (784
# features), scaled so that the mean squared norm of an image is MNIST's (88); one-hot labels.
digits = load_digits()
trX = np.pad(np.kron(digits.images / 16.0, np.ones((3, 3))), ((0, 0), (2, 2), (2, 2))).reshape(-1, 784)
trX = (trX * np.sqrt(88.0 / (trX ** 2).sum(axis=1).mean())).astype("float32")
trY = keras.utils.to_categorical(digits.target, 10)

# PORT: --do_pretrain False: the RBM pretraining (contrastive divergence, no optimizer) is left out;
# _create_variables_no_pretrain's truncated_normal(0.1) weights are used.
init = keras.initializers.TruncatedNormal(stddev=0.1)
model = keras.Sequential([keras.Input(shape=(784,))]
                         + [layers.Dense(units, activation=finetune_act_func, kernel_initializer=init) for units in rbm_layers]
                         + [layers.Dense(10, kernel_initializer=init, bias_initializer=keras.initializers.Constant(0.1),
                                         name="softmax_layer")])


def cost(ref_input, model_output):
    return - ops.mean(ref_input * ops.log(ops.clip(model_output, 1e-10, float('inf'))) +
                      (1 - ref_input) * ops.log(ops.clip(1 - model_output, 1e-10, float('inf'))))


# PORT: finetune_opt 'gradient_descent' -> SGD; the session loop -> fit.
model.compile(optimizer=keras.optimizers.SGD(finetune_learning_rate), loss=cost, metrics=["accuracy"])
history = model.fit(trX, trY, batch_size=finetune_batch_size, epochs=finetune_num_epochs, verbose=0)
print("accuracy", [round(a, 3) for a in history.history["accuracy"]])
