"""Keras 3 reference values for the losses and the loss-mean metrics.

Run as `.strata/python/bin/python scripts/keras-reference/losses.py`; writes
`runtime/tests/reference/losses.json`, which `runtime/tests/keras_losses.rs` reads.

Every case holds its float32 inputs (from a fixed numpy seed) and Keras' outputs:
- losses: Keras' per-sample values (`reduction=None`), and `per_sample`, what Strata's
  `per_sample` must give: Keras' values averaged over every axis but the batch, or, where
  the loss reduced the batch axis itself (Dice/Tversky's default `axis=None`, a cosine
  along axis 0), their mean repeated for every sample;
- metrics: the result after two `update_state` calls, the second with `sample_weight`.
"""

import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"

import keras  # noqa: E402
import numpy as np  # noqa: E402

rng = np.random.default_rng(20)
# The first argument, when given, is where to write (scripts/keras-reference/run --check).
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "..", "runtime", "tests", "reference", "losses.json"
)


def f32(a):
    return np.asarray(a, dtype=np.float32)


def tensor(a):
    a = np.asarray(a)
    dtype = "i32" if a.dtype.kind in "iu" else "f32"
    cast = int if dtype == "i32" else float
    return {
        "dtype": dtype,
        "shape": list(a.shape),
        "data": [cast(v) for v in a.reshape(-1).tolist()],
    }


def normal(*shape, scale=1.0):
    return f32(rng.normal(size=shape) * scale)


def uniform(lo, hi, *shape):
    return f32(rng.uniform(lo, hi, size=shape))


def probs(*shape):
    z = rng.normal(size=shape)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return f32(e / e.sum(axis=-1, keepdims=True))


def one_hot(batch, classes):
    return f32(np.eye(classes)[rng.integers(0, classes, size=batch)])


def binary(*shape):
    return f32(rng.integers(0, 2, size=shape))


LOSSES = []


def loss_case(name, cls, args, y_true, y_pred, batch_reduced=False):
    out = np.asarray(
        getattr(keras.losses, cls)(reduction=None, **args)(y_true, y_pred), dtype=np.float64
    )
    batch = y_pred.shape[0]
    if batch_reduced:
        per_sample = np.full(batch, out.mean())
    else:
        per_sample = out.reshape(batch, -1).mean(axis=1)
    LOSSES.append(
        {
            "name": name,
            "loss": cls,
            "args": args,
            "y_true": tensor(y_true),
            "y_pred": tensor(y_pred),
            "keras": tensor(f32(out)),
            "per_sample": [float(v) for v in per_sample],
        }
    )


# Regression.
loss_case("mse", "MeanSquaredError", {}, normal(4, 3), normal(4, 3))
loss_case("mae", "MeanAbsoluteError", {}, normal(4, 3), normal(4, 3))
loss_case("huber", "Huber", {"delta": 0.7}, normal(4, 3), normal(4, 3, scale=2.0))
loss_case("mape", "MeanAbsolutePercentageError", {}, normal(4, 3), normal(4, 3))
loss_case("mape rank 3", "MeanAbsolutePercentageError", {}, normal(2, 3, 4), normal(2, 3, 4))
loss_case(
    "msle with negatives clipped",
    "MeanSquaredLogarithmicError",
    {},
    uniform(-0.5, 3.0, 4, 3),
    uniform(-0.5, 3.0, 4, 3),
)
big = normal(4, 3, scale=2.0)
big[0, 0] = 40.0  # far from the target: log cosh must not overflow
loss_case("log_cosh", "LogCosh", {}, normal(4, 3), big)
loss_case("cosine axis -1", "CosineSimilarity", {}, normal(4, 3), normal(4, 3))
loss_case("cosine axis 1 rank 3", "CosineSimilarity", {"axis": 1}, normal(2, 3, 4), normal(2, 3, 4))
zero_row = normal(4, 3)
zero_row[2] = 0.0  # a zero vector: cosine 0, not NaN
loss_case("cosine zero vector", "CosineSimilarity", {}, normal(4, 3), zero_row)
loss_case(
    "cosine along the batch axis", "CosineSimilarity", {"axis": 0}, normal(4, 3), normal(4, 3),
    batch_reduced=True,
)

# Probabilistic.
loss_case("kl_divergence", "KLDivergence", {}, probs(4, 3), probs(4, 3))
loss_case("poisson", "Poisson", {}, f32(rng.poisson(2.0, size=(4, 3))), uniform(0.1, 3.0, 4, 3))

# Margins.
loss_case("hinge 0/1 targets", "Hinge", {}, binary(4, 3), normal(4, 3))
loss_case("squared_hinge 0/1 targets", "SquaredHinge", {}, binary(4, 3), normal(4, 3))
loss_case(
    "squared_hinge -1/1 targets", "SquaredHinge", {}, binary(4, 3) * 2.0 - 1.0, normal(4, 3)
)
loss_case(
    "squared_hinge other targets", "SquaredHinge", {}, uniform(-1.0, 1.0, 4, 3), normal(4, 3)
)
loss_case("categorical_hinge", "CategoricalHinge", {}, one_hot(4, 5), normal(4, 5))

# Cross-entropies.
loss_case("bce", "BinaryCrossentropy", {}, binary(4, 3), uniform(0.01, 0.99, 4, 3))
loss_case(
    "bce label_smoothing",
    "BinaryCrossentropy",
    {"label_smoothing": 0.2},
    binary(4, 3),
    uniform(0.01, 0.99, 4, 3),
)
loss_case(
    "bce from_logits label_smoothing",
    "BinaryCrossentropy",
    {"from_logits": True, "label_smoothing": 0.1},
    binary(4, 3),
    normal(4, 3, scale=3.0),
)
loss_case(
    "cce from_logits label_smoothing",
    "CategoricalCrossentropy",
    {"from_logits": True, "label_smoothing": 0.1},
    one_hot(4, 5),
    normal(4, 5),
)
loss_case(
    "scce from_logits",
    "SparseCategoricalCrossentropy",
    {"from_logits": True},
    f32(rng.integers(0, 5, size=4)).astype(np.int32),
    normal(4, 5),
)

# Focal.
loss_case(
    "binary focal defaults", "BinaryFocalCrossentropy", {}, binary(4, 3), uniform(0.01, 0.99, 4, 3)
)
loss_case(
    "binary focal class balancing gamma 3",
    "BinaryFocalCrossentropy",
    {"apply_class_balancing": True, "alpha": 0.3, "gamma": 3.0},
    binary(4, 3),
    uniform(0.01, 0.99, 4, 3),
)
loss_case(
    "binary focal from_logits label_smoothing",
    "BinaryFocalCrossentropy",
    {"from_logits": True, "label_smoothing": 0.1, "gamma": 1.5},
    binary(4, 3),
    normal(4, 3, scale=2.0),
)
loss_case(
    "binary focal gamma 0 is bce",
    "BinaryFocalCrossentropy",
    {"gamma": 0.0},
    binary(4, 3),
    uniform(0.01, 0.99, 4, 3),
)
loss_case(
    "categorical focal defaults", "CategoricalFocalCrossentropy", {}, one_hot(4, 5), probs(4, 5)
)
loss_case(
    "categorical focal from_logits label_smoothing",
    "CategoricalFocalCrossentropy",
    {"from_logits": True, "label_smoothing": 0.1, "alpha": 0.5, "gamma": 1.0},
    one_hot(4, 5),
    normal(4, 5),
)

# Overlap.
loss_case(
    "dice over the whole batch", "Dice", {}, binary(4, 3), uniform(0.0, 1.0, 4, 3),
    batch_reduced=True,
)
loss_case("dice per sample", "Dice", {"axis": [1]}, binary(4, 3), uniform(0.0, 1.0, 4, 3))
loss_case(
    "dice rank 3 per sample", "Dice", {"axis": [1, 2]}, binary(2, 3, 4), uniform(0.0, 1.0, 2, 3, 4)
)
loss_case(
    "tversky over the whole batch", "Tversky", {}, binary(4, 3), uniform(0.0, 1.0, 4, 3),
    batch_reduced=True,
)
loss_case(
    "tversky alpha beta per sample",
    "Tversky",
    {"alpha": 0.3, "beta": 0.7, "axis": [-1]},
    binary(4, 3),
    uniform(0.0, 1.0, 4, 3),
)

METRICS = []


def metric_case(name, cls, args, make_true, make_pred):
    m = getattr(keras.metrics, cls)(**args)
    batches = []
    for weighted in (False, True):
        y_true, y_pred = make_true(), make_pred()
        sw = uniform(0.0, 2.0, y_pred.shape[0]) if weighted else None
        m.update_state(y_true, y_pred, sample_weight=sw)
        batches.append(
            {
                "y_true": tensor(y_true),
                "y_pred": tensor(y_pred),
                "sample_weight": None if sw is None else [float(v) for v in sw],
            }
        )
    METRICS.append(
        {
            "name": name,
            "metric": cls,
            "keras_name": m.name,
            "args": args,
            "batches": batches,
            "result": float(m.result()),
        }
    )


metric_case("mse", "MeanSquaredError", {}, lambda: normal(4, 3), lambda: normal(4, 3))
metric_case("mae", "MeanAbsoluteError", {}, lambda: normal(2, 3, 2), lambda: normal(2, 3, 2))
metric_case(
    "mape", "MeanAbsolutePercentageError", {}, lambda: normal(4, 3), lambda: normal(4, 3)
)
metric_case(
    "msle",
    "MeanSquaredLogarithmicError",
    {},
    lambda: uniform(0.0, 3.0, 4, 3),
    lambda: uniform(0.0, 3.0, 4, 3),
)
metric_case("cosine", "CosineSimilarity", {}, lambda: normal(4, 3), lambda: normal(4, 3))
metric_case(
    "cosine axis 1 rank 3",
    "CosineSimilarity",
    {"axis": 1},
    lambda: normal(4, 3, 2),
    lambda: normal(4, 3, 2),
)
metric_case("logcosh", "LogCoshError", {}, lambda: normal(4, 3), lambda: normal(4, 3))
metric_case(
    "poisson",
    "Poisson",
    {},
    lambda: f32(rng.poisson(2.0, size=(4, 3))),
    lambda: uniform(0.1, 3.0, 4, 3),
)
metric_case("kl_divergence", "KLDivergence", {}, lambda: probs(4, 3), lambda: probs(4, 3))
metric_case("hinge", "Hinge", {}, lambda: binary(4, 3), lambda: normal(4, 3))
metric_case("squared_hinge", "SquaredHinge", {}, lambda: binary(4, 3), lambda: normal(4, 3))
metric_case(
    "categorical_hinge", "CategoricalHinge", {}, lambda: one_hot(4, 5), lambda: normal(4, 5)
)
metric_case(
    "binary_crossentropy",
    "BinaryCrossentropy",
    {},
    lambda: binary(4, 3),
    lambda: uniform(0.01, 0.99, 4, 3),
)
metric_case(
    "binary_crossentropy from_logits label_smoothing",
    "BinaryCrossentropy",
    {"from_logits": True, "label_smoothing": 0.2},
    lambda: binary(4, 3),
    lambda: normal(4, 3),
)
metric_case(
    "categorical_crossentropy label_smoothing",
    "CategoricalCrossentropy",
    {"label_smoothing": 0.1},
    lambda: one_hot(4, 5),
    lambda: probs(4, 5),
)
metric_case(
    "categorical_crossentropy from_logits",
    "CategoricalCrossentropy",
    {"from_logits": True},
    lambda: one_hot(4, 5),
    lambda: normal(4, 5),
)
metric_case(
    "sparse_categorical_crossentropy",
    "SparseCategoricalCrossentropy",
    {},
    lambda: rng.integers(0, 5, size=4).astype(np.int32),
    lambda: probs(4, 5),
)
metric_case(
    "sparse_categorical_crossentropy from_logits",
    "SparseCategoricalCrossentropy",
    {"from_logits": True},
    lambda: rng.integers(0, 5, size=4).astype(np.int32),
    lambda: normal(4, 5),
)

with open(OUT, "w") as fh:
    json.dump(
        {"keras_version": keras.__version__, "losses": LOSSES, "metrics": METRICS},
        fh,
        indent=1,
    )
    fh.write("\n")
print(f"wrote {len(LOSSES)} loss cases and {len(METRICS)} metric cases to {OUT}")
