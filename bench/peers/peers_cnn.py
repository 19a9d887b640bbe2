#!/usr/bin/env python3
"""The peers of `strata-bench cnn`: Keras' "simple MNIST convnet" on Fashion-MNIST.

    Input((28, 28, 1)), Conv2D(32, 3, relu), MaxPooling2D(2), Conv2D(64, 3, relu),
    MaxPooling2D(2), Flatten(), Dropout(0.5), Dense(10, softmax)
    Adam (Keras' defaults: lr 1e-3, b1 0.9, b2 0.999, eps 1e-7), sparse categorical
    cross-entropy, accuracy; batch 128; the first --train-size training images, scaled to
    [0, 1]; reshuffled every epoch, partial last batch kept.

One framework, one configuration, one process; the last line printed is `RESULT {json}`
with the fields strata-bench reads: epoch_s (per epoch, the first one compiling), fit_s,
loss and accuracy of the last epoch (training, dropout on, as Keras' History reports them),
peak_rss_mib (getrusage), plus import/setup/data times and the versions.

    python peers_cnn.py --framework keras-tf|keras-jax|jax [--batch 128] [--train-size 5000]
                        [--epochs 4] [--data DIR]

Thread pools are the frameworks' own defaults, as in the seed workload's peer script: each
uses every core the process may run on, as Strata's native backend does; the RESULT's
`info` records what they chose. The jax framework runs on whatever device JAX picks (the
GPU when jax has CUDA: scripts/gpu-check runs it there).
"""
import argparse
import gzip
import json
import os
import resource
import sys
import time

FRAMEWORKS = ["keras-tf", "keras-jax", "jax"]
LR, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-7
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """An IDX file (plain or .gz) as a numpy array: magic 0, 0, dtype 0x08 (uint8), rank;
    then one big-endian u32 per dimension; then the data."""
    import numpy as np
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    if raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise SystemExit("%s: not an IDX file of unsigned bytes" % path)
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    data = np.frombuffer(raw, np.uint8, offset=4 + 4 * rank)
    return data.reshape(dims)


def load_data(data_dir, n, shape=(28, 28, 1)):
    """The first n training images in [0, 1], each of `shape`, and their labels."""
    import numpy as np
    x = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte"))
    y = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte"))
    if not 1 <= n <= x.shape[0]:
        raise SystemExit("--train-size must be in 1..%d, got %d" % (x.shape[0], n))
    x = (x[:n].astype(np.float32) / 255.0).reshape((n,) + tuple(shape))
    return x, y[:n].astype(np.int32)


def peak_rss_mib():
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# --------------------------------------------------------------------------- Keras 3
def convnet(keras):
    from keras import layers
    return [
        keras.Input(shape=(28, 28, 1)),
        layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(10, activation="softmax"),
    ]


def run_keras(backend, args, build=convnet, shape=(28, 28, 1)):
    """Keras 3 on `backend` fitting the Sequential of `build(keras)`'s layers on images of
    `shape` (peers_bncnn.py runs its convnet and peers_rnn.py its LSTM through here too)."""
    os.environ["KERAS_BACKEND"] = backend
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    t0 = time.perf_counter()
    import keras
    import_s = time.perf_counter() - t0
    t = time.perf_counter()
    x, y = load_data(args.data, args.train_size, shape)
    data_s = time.perf_counter() - t
    keras.utils.set_random_seed(0)

    class EpochTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.times = []

        def on_epoch_begin(self, epoch, logs=None):
            self._t = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.times.append(time.perf_counter() - self._t)

    t1 = time.perf_counter()
    model = keras.Sequential(build(keras))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    setup_s = time.perf_counter() - t1
    timer = EpochTimer()
    t2 = time.perf_counter()
    # verbose=0: Strata's side fits without a progress bar too.
    hist = model.fit(x, y, batch_size=args.batch, epochs=args.epochs, verbose=0,
                     callbacks=[timer])
    fit_s = time.perf_counter() - t2
    info = {"keras": keras.__version__, "jit_compile": bool(getattr(model, "jit_compile", None))}
    if backend == "tensorflow":
        import tensorflow as tf
        info["tensorflow"] = tf.__version__
        info["tf_threads"] = [tf.config.threading.get_intra_op_parallelism_threads(),
                              tf.config.threading.get_inter_op_parallelism_threads()]
    else:
        import jax
        info["jax"] = jax.__version__
        info["devices"] = str(jax.devices())
    return dict(import_s=import_s, data_s=data_s, setup_s=setup_s, fit_s=fit_s,
                epoch_s=timer.times, loss=float(hist.history["loss"][-1]),
                accuracy=float(hist.history["accuracy"][-1]), info=info)


# --------------------------------------------------------------------------- JAX + optax
def run_jax(args):
    t0 = time.perf_counter()
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from jax import lax
    import_s = time.perf_counter() - t0
    t = time.perf_counter()
    x_np, y_np = load_data(args.data, args.train_size)
    data_s = time.perf_counter() - t
    n, batch = x_np.shape[0], args.batch

    t1 = time.perf_counter()
    ks = jax.random.split(jax.random.PRNGKey(0), 4)

    def glorot(k, shape, fan_in, fan_out):
        lim = (6.0 / (fan_in + fan_out)) ** 0.5
        return jax.random.uniform(k, shape, jnp.float32, -lim, lim)

    # Keras' Glorot-uniform for a kernel kh×kw×ci×co: fans kh·kw·ci and kh·kw·co.
    params = {
        "c1": (glorot(ks[0], (3, 3, 1, 32), 9, 9 * 32), jnp.zeros(32)),
        "c2": (glorot(ks[1], (3, 3, 32, 64), 9 * 32, 9 * 64), jnp.zeros(64)),
        "d": (glorot(ks[2], (1600, 10), 1600, 10), jnp.zeros(10)),
    }
    opt = optax.adam(LR, b1=B1, b2=B2, eps=EPS)
    opt_state = opt.init(params)
    jax.block_until_ready((params, opt_state))
    setup_s = time.perf_counter() - t1

    def conv(h, wb):
        w, b = wb
        h = lax.conv_general_dilated(h, w, (1, 1), "VALID",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jax.nn.relu(h + b)

    def pool(h):
        return lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def loss_fn(p, xb, yb, key):
        h = pool(conv(xb, p["c1"]))
        h = pool(conv(h, p["c2"]))
        h = h.reshape(h.shape[0], -1)
        keep = jax.random.bernoulli(key, 0.5, h.shape)
        h = jnp.where(keep, h / 0.5, 0.0)
        w, b = p["d"]
        logits = h @ w + b
        return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean(), logits

    def step(p, o, m, key, xb, yb):
        key, sub = jax.random.split(key)
        (loss, logits), g = jax.value_and_grad(loss_fn, has_aux=True)(p, xb, yb, sub)
        upd, o = opt.update(g, o, p)
        p = optax.apply_updates(p, upd)
        nb = xb.shape[0]
        correct = jnp.sum(jnp.argmax(logits, -1) == yb).astype(jnp.float32)
        return p, o, m + jnp.stack([loss * nb, correct]), key

    # One dispatch per step, donated state, two shapes compiled (full and partial batch),
    # as the seed workload's `jax` peer.
    step = jax.jit(step, donate_argnums=(0, 1, 2, 3))
    host_rng = np.random.default_rng(1)
    key = jax.random.PRNGKey(1)

    times = []
    t2 = time.perf_counter()
    for _ in range(args.epochs):
        te = time.perf_counter()
        perm = host_rng.permutation(n)
        xh, yh = x_np[perm], y_np[perm]
        batches = jax.device_put([(xh[i:i + batch], yh[i:i + batch]) for i in range(0, n, batch)])
        m = jnp.zeros(2, jnp.float32)
        for xb, yb in batches:
            params, opt_state, m, key = step(params, opt_state, m, key, xb, yb)
        m = np.asarray(m)  # sync once per epoch
        times.append(time.perf_counter() - te)
    fit_s = time.perf_counter() - t2
    return dict(import_s=import_s, data_s=data_s, setup_s=setup_s, fit_s=fit_s, epoch_s=times,
                loss=float(m[0] / n), accuracy=float(m[1] / n),
                info={"jax": jax.__version__, "optax": optax.__version__,
                      "devices": str(jax.devices())})


def arguments(doc, frameworks):
    """The command line every peer script takes (peers_bncnn.py's and peers_rnn.py's too)."""
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", choices=frameworks, required=True)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--train-size", type=int, default=5000)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--data", default=os.environ.get("STRATA_FASHION_MNIST", DEFAULT_DATA))
    args = ap.parse_args()
    if args.batch < 1 or args.epochs < 1:
        ap.error("--batch and --epochs must be >= 1")
    return args


def report(r, args, workload):
    """Prints the RESULT line strata-bench reads, with the run's configuration."""
    r.update(framework=args.framework, workload=workload, batch=args.batch,
             samples=args.train_size, epochs=args.epochs, peak_rss_mib=peak_rss_mib(),
             cpus=len(os.sched_getaffinity(0)))
    sys.stdout.flush()
    print("RESULT " + json.dumps(r), flush=True)


def main():
    args = arguments(__doc__, FRAMEWORKS)
    if args.framework == "keras-tf":
        r = run_keras("tensorflow", args)
    elif args.framework == "keras-jax":
        r = run_keras("jax", args)
    else:
        r = run_jax(args)
    report(r, args, "cnn")


if __name__ == "__main__":
    main()
