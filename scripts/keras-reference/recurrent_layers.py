"""Keras 3 reference values for the recurrent layers: `SimpleRNN`, `LSTM` and `GRU`.

Run as `.strata/python/bin/python scripts/keras-reference/recurrent_layers.py [OUT]`;
writes `runtime/tests/reference/recurrent_layers.json`, which
`runtime/tests/keras_recurrent_layers.rs` reads.

Every case holds the layer's class and arguments (as Keras takes them), its float32 input
`(batch, timesteps, features)` and weights (from a fixed numpy seed, in Keras' order and
layout, set with `set_weights`), the weights' Keras paths, Keras' output, and the
layer's parameter count (`count_params`, what Keras' summary shows).
"""

import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"

import keras  # noqa: E402
import numpy as np  # noqa: E402

rng = np.random.default_rng(15)
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "..", "runtime", "tests", "reference",
    "recurrent_layers.json",
)


def tensor(a):
    a = np.asarray(a, dtype=np.float32)
    return {
        "dtype": "f32",
        "shape": list(a.shape),
        "data": [float(v) for v in a.reshape(-1).tolist()],
    }


# (class, constructor arguments, input shape with the batch axis)
CASES = [
    ("SimpleRNN", dict(units=3), (2, 4, 5)),
    ("SimpleRNN", dict(units=3, return_sequences=True, go_backwards=True), (2, 4, 5)),
    ("SimpleRNN", dict(units=2, activation="relu", use_bias=False, return_sequences=True),
     (3, 5, 2)),
    ("LSTM", dict(units=3), (2, 4, 5)),
    ("LSTM", dict(units=3, return_sequences=True), (2, 4, 5)),
    ("LSTM", dict(units=2, go_backwards=True, return_sequences=True), (3, 5, 2)),
    ("LSTM", dict(units=2, go_backwards=True), (3, 5, 2)),
    ("LSTM", dict(units=3, activation="relu", recurrent_activation="tanh", use_bias=False),
     (2, 3, 4)),
    ("GRU", dict(units=3), (2, 4, 5)),
    ("GRU", dict(units=3, return_sequences=True, go_backwards=True), (2, 4, 5)),
    ("GRU", dict(units=3, reset_after=False, return_sequences=True), (2, 4, 5)),
    ("GRU", dict(units=2, reset_after=False, go_backwards=True), (3, 5, 2)),
    ("GRU", dict(units=2, use_bias=False, activation="relu"), (3, 5, 2)),
    ("GRU", dict(units=2, use_bias=False, reset_after=False, return_sequences=True),
     (2, 3, 4)),
]


def case(cls, kwargs, shape):
    layer = getattr(keras.layers, cls)(**kwargs)
    x = rng.normal(size=shape).astype(np.float32)
    layer(x)  # builds it
    weights = [(0.5 * rng.normal(size=w.shape)).astype(np.float32) for w in layer.weights]
    layer.set_weights(weights)
    y = np.asarray(layer(x))
    return {
        "class": cls,
        "args": kwargs,
        "inputs": [tensor(x)],
        "weight_paths": [w.path for w in layer.weights],
        "weights": [tensor(w) for w in weights],
        "output": tensor(y),
        "params": int(layer.count_params()),
    }


out = {"keras": keras.__version__, "cases": [case(*c) for c in CASES]}
with open(OUT, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
