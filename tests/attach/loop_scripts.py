"""Hand-written training loops, as users write them, for `tfguard run` (issue 42, item 2).

Each script knows nothing about tfguard. They train on scikit-learn's real
8x8 digits (the `PRELUDE` of `scripts.py`), shaped as the keras-io guides
write them:

* `GUIDE`: "Writing a training loop from scratch" (TensorFlow): a
  functional Dense network on pixels, `Adam`, a
  `SparseCategoricalCrossentropy(from_logits=True)` loss object, train and
  validation `SparseCategoricalAccuracy` metrics updated by hand, a
  `GradientTape` step, eager or in a `tf.function`. `{pixels}` is how the
  script feeds its pixels: `"pixels"` as the guide does (0..255, never
  scaled) or `"pixels / 255.0"` (its healthy twin).
* `GAN`: the guide's GAN loop: a discriminator and a generator, one
  optimizer each, both updated in one `tf.function` step.
* `DEAD`: the guide's loop with a hidden ReLU layer whose bias starts at
  `{bias}` (-50: dead from the first step; 0: its healthy twin).
* `ON_BATCH`: a compiled model trained with `train_on_batch` in a loop
  (the StackOverflow shape), on `{pixels}`.
* `GUARDED_STEP`: the guide's loop whose step is wrapped with
  `tfguard.guard_step` (a script that already uses tfguard), policy
  `"skip"`; `{poison}` puts a NaN into one example (`""`: its healthy twin).
"""

from __future__ import annotations

from .scripts import PRELUDE

PIXELS = PRELUDE + """
import tensorflow as tf
pixels = np.round(x * (255.0 / 16.0))  # MNIST-like pixels, 0..255
"""

GUIDE = PIXELS + """
inputs = keras.Input(shape=(64,), name="digits")
x1 = keras.layers.Dense(64, activation="relu", name="dense_1")(inputs)
x2 = keras.layers.Dense(64, activation="relu", name="dense_2")(x1)
outputs = keras.layers.Dense(10, name="predictions")(x2)
model = keras.Model(inputs=inputs, outputs=outputs, name="guide_mlp")

optimizer = keras.optimizers.Adam(learning_rate=1e-3)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
train_acc_metric = keras.metrics.SparseCategoricalAccuracy()
val_acc_metric = keras.metrics.SparseCategoricalAccuracy()

features = ({pixels}).astype("float32")
train_dataset = tf.data.Dataset.from_tensor_slices((features[:256], y[:256])).shuffle(256, seed=0).batch(32)
val_dataset = tf.data.Dataset.from_tensor_slices((features[256:], y[256:])).batch(32)

{decorator}
def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss_value = loss_fn(y, logits)
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply(grads, model.trainable_weights)
    train_acc_metric.update_state(y, logits)
    return loss_value

{decorator}
def test_step(x, y):
    val_logits = model(x, training=False)
    val_acc_metric.update_state(y, val_logits)

for epoch in range(4):
    for step, (x_batch_train, y_batch_train) in enumerate(train_dataset):
        loss_value = train_step(x_batch_train, y_batch_train)
        if epoch == 0 and step == 0:
            print("SCRIPT-SAYS first batch loss", round(float(loss_value), 1))
    train_acc = train_acc_metric.result()
    train_acc_metric.reset_state()
    for x_batch_val, y_batch_val in val_dataset:
        test_step(x_batch_val, y_batch_val)
    val_acc = val_acc_metric.result()
    val_acc_metric.reset_state()
print("SCRIPT-SAYS iterations", int(optimizer.iterations.numpy()))
"""

GAN = PIXELS + """
latent_dim = 8
discriminator = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, name="d_hidden"),
                                  keras.layers.LeakyReLU(negative_slope=0.2),
                                  keras.layers.Dense(1, name="d_out")], name="discriminator")
generator = keras.Sequential([keras.Input((latent_dim,)), keras.layers.Dense(32, name="g_hidden"),
                              keras.layers.LeakyReLU(negative_slope=0.2),
                              keras.layers.Dense(64, activation="sigmoid", name="g_out")], name="generator")
d_optimizer = keras.optimizers.Adam(learning_rate=1e-3)
g_optimizer = keras.optimizers.Adam(learning_rate=1e-3)
loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)
images = ({pixels}).astype("float32")
dataset = tf.data.Dataset.from_tensor_slices(images).shuffle(320, seed=0).batch(32)

@tf.function
def train_step(real_images):
    batch_size = tf.shape(real_images)[0]
    random_latent_vectors = tf.random.normal(shape=(batch_size, latent_dim))
    generated_images = generator(random_latent_vectors)
    combined_images = tf.concat([generated_images, real_images], axis=0)
    labels = tf.concat([tf.ones((batch_size, 1)), tf.zeros((batch_size, 1))], axis=0)
    labels += 0.05 * tf.random.uniform(tf.shape(labels))
    with tf.GradientTape() as tape:
        predictions = discriminator(combined_images)
        d_loss = loss_fn(labels, predictions)
    grads = tape.gradient(d_loss, discriminator.trainable_weights)
    d_optimizer.apply(grads, discriminator.trainable_weights)
    random_latent_vectors = tf.random.normal(shape=(batch_size, latent_dim))
    misleading_labels = tf.zeros((batch_size, 1))
    with tf.GradientTape() as tape:
        predictions = discriminator(generator(random_latent_vectors))
        g_loss = loss_fn(misleading_labels, predictions)
    grads = tape.gradient(g_loss, generator.trainable_weights)
    g_optimizer.apply(grads, generator.trainable_weights)
    return d_loss, g_loss

for epoch in range(3):
    for real_images in dataset:
        d_loss, g_loss = train_step(real_images)
print("SCRIPT-SAYS steps", int(d_optimizer.iterations.numpy()), int(g_optimizer.iterations.numpy()))
"""

DEAD = PIXELS + """
model = keras.Sequential([
    keras.Input((64,)),
    keras.layers.Dense(64, activation="relu", bias_initializer=keras.initializers.Constant({bias}), name="hidden"),
    keras.layers.Dense(32, activation="relu", name="second"),
    keras.layers.Dense(10, name="predictions"),
], name="deep")
optimizer = keras.optimizers.Adam(learning_rate=1e-3)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
features = (pixels / 255.0).astype("float32")
dataset = tf.data.Dataset.from_tensor_slices((features, y)).shuffle(320, seed=0).batch(32)

@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss_value = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply(grads, model.trainable_weights)
    return loss_value

for epoch in range(3):
    for x_batch, y_batch in dataset:
        train_step(x_batch, y_batch)
"""

ON_BATCH = PIXELS + """
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu", name="hidden"),
                          keras.layers.Dense(10, activation="softmax", name="probabilities")], name="batched")
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
features = ({pixels}).astype("float32")
for epoch in range(3):
    for start in range(0, 320, 32):
        logs = model.train_on_batch(features[start:start + 32], y[start:start + 32], return_dict=True)
print("SCRIPT-SAYS last loss finite", bool(np.isfinite(logs["loss"])))
"""

GUARDED_STEP = PIXELS + """
import tfguard

model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(10)], name="guarded")
optimizer = keras.optimizers.Adam(learning_rate=1e-3)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
features = (pixels / 255.0).astype("float32")
{poison}

@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss_value = loss_fn(y, model(x, training=True))
    optimizer.apply(tape.gradient(loss_value, model.trainable_weights), model.trainable_weights)
    return loss_value

step = tfguard.guard_step(train_step, model, policy="skip", quarantine_dir=None)
for epoch in range(3):
    for start in range(0, 320, 32):
        step(tf.constant(features[start:start + 32]), tf.constant(y[start:start + 32]))
print("SCRIPT-SAYS iterations", int(optimizer.iterations.numpy()))
"""

POISON = "features[100, 3] = np.nan"
UNSCALED = "pixels"
SCALED = "pixels / 255.0"
TRACED = "@tf.function"
EAGER = ""

# Transfer learning: the head trained on a frozen base, then everything fine-tuned after a second
# compile with a lower learning rate (issue 42, item 3). `{recompile}` False: its twin, one compile.
FINE_TUNE = PRELUDE + """
base = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu", name="base_dense")],
                        name="base")
model = keras.Sequential([base, keras.layers.Dense(10, activation="softmax", name="head")], name="transfer")
base.trainable = False
model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x / 16.0, y, epochs=2, batch_size=32, verbose=0)
if {recompile}:
    base.trainable = True
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
model.fit(x / 16.0, y, epochs=2, batch_size=32, verbose=0)
"""
