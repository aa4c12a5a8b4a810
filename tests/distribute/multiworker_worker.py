"""One worker of the multi-worker tests (run as a script by test_multiworker.py).

Every worker runs this same program with its own `TF_CONFIG`; the argument
is a JSON object of settings. The worker trains a tiny guarded classifier
under `MultiWorkerMirroredStrategy`, on its own shard of data (NaN in the
batches of one worker only), and writes what the test checks into `out`:
`result-<worker>.json` (history, events, steps, error, timings) and
`weights-<worker>.npz` (every model variable). A worker told to die kills
itself with SIGKILL right after a given batch, like a preempted machine.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def main(settings: dict) -> int:
    import keras
    import numpy as np
    import tensorflow as tf

    import tfguard
    from tfguard._distribute import multiworker
    from tfguard._errors import WorkerLostError

    started = time.time()
    options = tf.distribute.experimental.CommunicationOptions(
        timeout_seconds=settings["collective_timeout"]
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    info = multiworker.worker_info(strategy)
    out = settings["out"]
    result = {
        "worker": info.name,
        "address": info.address,
        "chief": multiworker.is_chief(strategy),
        "replicas": strategy.num_replicas_in_sync,
    }

    def save_result():
        path = os.path.join(out, f"result-{info.name}.json")
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1, default=str)
        os.replace(path + ".tmp", path)

    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential(
            [
                keras.Input((4,)),
                keras.layers.Dense(8, activation="relu", name="hidden"),
                keras.layers.Dense(3, activation="softmax", name="out"),
            ]
        )
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy")
    multiworker.enable_multi_worker(model)
    tfguard.guard(
        model,
        policy="skip",
        quarantine_dir=multiworker.worker_dir(settings["quarantine"], strategy),
    )

    per_replica = settings["per_replica_batch"]

    def dataset_fn(context):
        shard = context.input_pipeline_id  # this worker's own data
        rng = np.random.default_rng(100 + shard)
        count = per_replica * settings["steps"]
        x = rng.random((count, 4), dtype=np.float32)
        y = (np.arange(count) % 3).astype("int64")
        if shard == settings["bad_worker"]:
            for batch in settings["bad_batches"]:
                x[batch * per_replica + 1, 2] = np.nan
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(per_replica).repeat()

    dataset = strategy.distribute_datasets_from_function(dataset_fn)

    class Probe(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            result["initial_step"] = int(self.model.optimizer.iterations.numpy())

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch
            result.setdefault("epochs_run", []).append(epoch)

        def on_train_batch_end(self, batch, logs=None):
            if settings.get("kill") == [info.task_id, self.epoch, batch]:
                result["killed_at"] = time.time()
                result["killed_step"] = int(self.model.optimizer.iterations.numpy())
                save_result()
                os.kill(os.getpid(), signal.SIGKILL)
            if settings.get("hang") == [info.task_id, self.epoch, batch]:
                result["hung_at"] = time.time()
                save_result()
                # Alive, heartbeats on, but never reaching the next collective.
                time.sleep(settings["hang_seconds"])

    # One logdir per worker, as if each had its own disk: what a non-chief writes is then visible.
    # run_subdir=False: a restarted run writes into the same run directory.
    logger = tfguard.summary.Logger(
        multiworker.worker_dir(settings["logdir"], strategy),
        run_subdir=False,
        scalars_every=settings.get("scalars_every", 1),
        histograms_every=settings.get("histograms_every", 0),
        # deterministic, alike on every worker: the workers must run the same trace of the step
        record_if=(lambda step: step % 2 == 1) if settings.get("histograms_every") else None,
        flush_millis=500,
    )
    backup = keras.callbacks.BackupAndRestore(multiworker.worker_dir(settings["backup"], strategy))
    callbacks = [backup, Probe(), logger]  # restore first: the logger reads the restored step
    code = 0
    fit_started = time.time()
    try:
        with multiworker.lost_workers(model):
            history = model.fit(
                dataset,
                epochs=settings["epochs"],
                steps_per_epoch=settings["steps"],
                verbose=0,
                callbacks=callbacks,
            )
        result["guard_skipped"] = history.history["guard_skipped"]
        result["guard_violations"] = history.history["guard_violations"]
    except WorkerLostError as error:
        result["error"] = {
            "type": type(error).__name__,
            "message": str(error),
            "workers": error.workers,
            "tasks": error.tasks,
            "step": error.step,
            "cause": type(error.__cause__).__name__,
            "at": time.time(),
        }
        code = 3
    result["iterations"] = int(model.optimizer.iterations.numpy())
    result["events"] = [
        {
            "step": e.step,
            "stage": e.stage,
            "where": e.where,
            "counts": e.counts,
            "action": e.action,
            "failed": e.failed,
            "quarantine": e.quarantine,
            "message": e.message,
        }
        for e in tfguard.guard_events(model)
    ]
    result["run_path"] = logger.run_path
    result["seconds"] = {
        "strategy": round(fit_started - started, 2),
        "fit": round(time.time() - fit_started, 2),
    }
    np.savez(
        os.path.join(out, f"weights-{info.name}.npz"),
        **{f"w{i:02d}": np.asarray(v.numpy()) for i, v in enumerate(model.weights)},
    )
    save_result()
    return code


if __name__ == "__main__":
    code = main(json.loads(sys.argv[1]))
    sys.stdout.flush()
    sys.stderr.flush()
    # A survivor's collectives are aborted and its gRPC server waits for a dead peer at exit:
    # leave at once (results are on disk).
    os._exit(code)
