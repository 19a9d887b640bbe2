"""JAX reference for `Model::value_and_grad` on the tutorial model.

Run as `.strata/python/bin/python scripts/keras-reference/value_and_grad.py`; writes
`runtime/tests/reference/value_and_grad.json`, which `runtime/tests/batch_calls.rs` reads.

The model is the tutorial's: Dense 784->128 relu, Dense 128->64 relu, Dense 64->10 softmax,
sparse categorical cross-entropy, the mean over the batch (Keras' `sum_over_batch_size`).
Its weights and a batch of 16 samples are defined by integer formulas (no random numbers,
so the Rust test rebuilds them exactly: each value is computed in float64 by the same
operations in the same order, then rounded to float32, which is what both sides use).
JAX computes the loss and the gradients in float64 from those float32 values, so the
reference carries no float32 rounding of its own.

Written: the loss; for every parameter (named as Strata names them), its gradient's shape,
its Frobenius norm, and its values on the rows listed (every row, except for the two large
kernels, where every 32nd and every 4th row keep the file small; the norm covers them all);
and the sums of the inputs and weights, so that a formula changed on one side only shows as
such rather than as a gradient mismatch.
"""

import json
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "..", "runtime", "tests", "reference", "value_and_grad.json"
)

SIZES = [784, 128, 64, 10]
NAMES = ["dense", "dense_1", "dense_2"]
BATCH = 16
# Which rows of each kernel's gradient are written (every `step`-th).
ROW_STEP = {"dense/kernel": 32, "dense_1/kernel": 4}


def f32(v):
    return float(np.float32(v))


def kernel(layer, fan_in, fan_out):
    # (h / 1009 - 0.5) * scale with h = (7919i + 104729j + 31ij + 97l) mod 1009: values in
    # [-0.5, 0.5) * scale, the product term keeping the columns from cancelling out. The
    # scales are about He initialisation's (uniform with variance 2 / fan_in), larger for
    # the last layer so that the softmax is far from uniform.
    scale = [0.18, 0.45, 1.5][layer]
    return np.array(
        [
            [
                f32(((7919 * i + 104729 * j + 31 * i * j + 97 * layer) % 1009 / 1009.0 - 0.5) * scale)
                for j in range(fan_out)
            ]
            for i in range(fan_in)
        ],
        dtype=np.float32,
    )


def bias(layer, fan_out):
    # ((3j + l) mod 7 - 3) / 70.
    return np.array([f32(((3 * j + layer) % 7 - 3) / 70.0) for j in range(fan_out)], dtype=np.float32)


def inputs():
    # Pixel-like values in [0, 1): ((31s + 17k + 5sk) mod 23) / 23.
    return np.array(
        [[f32(((31 * s + 17 * k + 5 * s * k) % 23) / 23.0) for k in range(SIZES[0])] for s in range(BATCH)],
        dtype=np.float32,
    )


def labels():
    return np.array([(7 * s + 3) % 10 for s in range(BATCH)], dtype=np.int64)


def loss_fn(params, x, y):
    h = x
    for i, name in enumerate(NAMES):
        z = h @ params[f"{name}/kernel"] + params[f"{name}/bias"]
        h = jax.nn.relu(z) if i < len(NAMES) - 1 else z
    # Softmax then cross-entropy, as the log of the softmax (the exact value; Keras' clip
    # at 1e-7 does not bind for these probabilities, which the test's tolerance covers).
    logp = jax.nn.log_softmax(h, axis=-1)
    per_sample = -jnp.take_along_axis(logp, y[:, None], axis=-1)[:, 0]
    return jnp.mean(per_sample)


def main():
    params = {}
    for layer, name in enumerate(NAMES):
        params[f"{name}/kernel"] = kernel(layer, SIZES[layer], SIZES[layer + 1])
        params[f"{name}/bias"] = bias(layer, SIZES[layer + 1])
    x, y = inputs(), labels()
    p64 = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in params.items()}
    loss, grads = jax.value_and_grad(loss_fn)(p64, jnp.asarray(x, dtype=jnp.float64), jnp.asarray(y))
    out = {
        "batch": BATCH,
        "sizes": SIZES,
        "x_sum": float(np.sum(x, dtype=np.float64)),
        "y_sum": int(np.sum(y)),
        "loss": float(loss),
        "params": [],
    }
    for name in [f"{n}/{p}" for n in NAMES for p in ("kernel", "bias")]:
        g = np.asarray(grads[name], dtype=np.float64)
        step = ROW_STEP.get(name, 1)
        rows = list(range(0, g.shape[0], step))
        out["params"].append(
            {
                "name": name,
                "shape": list(g.shape),
                "weight_sum": float(np.sum(params[name], dtype=np.float64)),
                "grad_norm": float(np.linalg.norm(g)),
                "rows": rows,
                "grad": [float(f"{v:.10g}") for v in g[rows].reshape(-1)],
            }
        )
    with open(OUT, "w") as f:
        json.dump(out, f, indent=0)
        f.write("\n")


main()
