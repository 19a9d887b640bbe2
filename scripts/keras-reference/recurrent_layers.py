"""Keras 3 reference values for the recurrent layers: `SimpleRNN`, `LSTM` and `GRU`, and the
wrappers `Bidirectional` (of each) and `TimeDistributed` (of `Dense` and `Conv2D`).

Run as `.strata/python/bin/python scripts/keras-reference/recurrent_layers.py [OUT]`;
writes `runtime/tests/reference/recurrent_layers.json`, which
`runtime/tests/keras_recurrent_layers.rs` reads.

Every case holds the layer's class and arguments (as Keras takes them), its float32 input
`(batch, timesteps, features)` and weights (from a fixed numpy seed, in Keras' order and
layout, set with `set_weights`), the weights' Keras paths, Keras' output, and the
layer's parameter count (`count_params`, what Keras' summary shows); a layer with
`return_state` also its states, in Keras' order, under `states`.
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


def measured(layer, cls, kwargs, shape):
    x = rng.normal(size=shape).astype(np.float32)
    layer(x)  # builds it
    weights = [(0.5 * rng.normal(size=w.shape)).astype(np.float32) for w in layer.weights]
    layer.set_weights(weights)
    ys = layer(x)
    ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
    out = {
        "class": cls,
        "args": kwargs,
        "inputs": [tensor(x)],
        "weight_paths": [w.path for w in layer.weights],
        "weights": [tensor(w) for w in weights],
        "output": tensor(ys[0]),
        "params": int(layer.count_params()),
    }
    if len(ys) > 1:
        out["states"] = [tensor(s) for s in ys[1:]]
    return out


def case(cls, kwargs, shape):
    return measured(getattr(keras.layers, cls)(**kwargs), cls, kwargs, shape)


# The wrappers, after the cases above so that their random draws stay the same:
# (wrapper, its arguments, (wrapped class, its arguments), input shape with the batch axis).
# The wrapped layer is named as Keras names a model's first of its class, so the paths read
# `forward_lstm/lstm_cell/kernel`, `dense/kernel` whatever ran before.
WRAPPED = [
    ("Bidirectional", dict(), ("LSTM", dict(units=3)), (2, 4, 5)),
    ("Bidirectional", dict(merge_mode="sum"),
     ("GRU", dict(units=3, return_sequences=True)), (2, 4, 5)),
    ("Bidirectional", dict(merge_mode="mul"),
     ("SimpleRNN", dict(units=2, return_sequences=True)), (3, 5, 2)),
    ("Bidirectional", dict(merge_mode="ave"),
     ("LSTM", dict(units=2, return_sequences=True)), (2, 3, 4)),
    ("Bidirectional", dict(),
     ("GRU", dict(units=2, reset_after=False)), (3, 5, 2)),
    ("TimeDistributed", dict(), ("Dense", dict(units=4, activation="relu")), (2, 3, 5)),
    ("TimeDistributed", dict(), ("Dense", dict(units=3)), (2, 4, 3, 5)),
    ("TimeDistributed", dict(), ("Conv2D", dict(filters=2, kernel_size=3)), (2, 3, 6, 6, 2)),
]
BASE_NAMES = {"SimpleRNN": "simple_rnn", "LSTM": "lstm", "GRU": "gru", "Dense": "dense",
              "Conv2D": "conv2d"}


def wrapped_case(cls, kwargs, inner, shape):
    inner_cls, inner_args = inner
    layer = getattr(keras.layers, inner_cls)(**inner_args, name=BASE_NAMES[inner_cls])
    wrapper = getattr(keras.layers, cls)(layer, **kwargs)
    args = dict(kwargs, layer={"class": inner_cls, "args": inner_args})
    return measured(wrapper, cls, args, shape)


# `return_state`: the output, then the final states (LSTM `h, c`; GRU and SimpleRNN `h`;
# Bidirectional the forward copy's, then the backward copy's). After the cases above, so
# their random draws stay the same.
STATES = [
    ("LSTM", dict(units=3, return_state=True), (2, 4, 5)),
    ("LSTM", dict(units=3, return_state=True, return_sequences=True), (2, 4, 5)),
    ("LSTM", dict(units=2, return_state=True, go_backwards=True), (3, 5, 2)),
    ("LSTM", dict(units=2, return_state=True, return_sequences=True, go_backwards=True),
     (3, 5, 2)),
    ("GRU", dict(units=3, return_state=True), (2, 4, 5)),
    ("GRU", dict(units=3, return_state=True, return_sequences=True, go_backwards=True),
     (2, 4, 5)),
    ("GRU", dict(units=2, return_state=True, reset_after=False), (3, 5, 2)),
    ("GRU", dict(units=2, return_state=True, reset_after=False, return_sequences=True,
                 go_backwards=True), (3, 5, 2)),
    ("SimpleRNN", dict(units=3, return_state=True), (2, 4, 5)),
    ("SimpleRNN", dict(units=2, return_state=True, return_sequences=True, go_backwards=True),
     (3, 5, 2)),
]
WRAPPED_STATES = [
    ("Bidirectional", dict(), ("LSTM", dict(units=3, return_state=True)), (2, 4, 5)),
    ("Bidirectional", dict(merge_mode="sum"),
     ("LSTM", dict(units=2, return_state=True, return_sequences=True)), (3, 5, 2)),
    ("Bidirectional", dict(),
     ("GRU", dict(units=2, return_state=True, return_sequences=True)), (2, 4, 5)),
    ("Bidirectional", dict(merge_mode="ave"),
     ("SimpleRNN", dict(units=2, return_state=True)), (3, 5, 2)),
]

out = {
    "keras": keras.__version__,
    "cases": [case(*c) for c in CASES] + [wrapped_case(*c) for c in WRAPPED]
    + [case(*c) for c in STATES] + [wrapped_case(*c) for c in WRAPPED_STATES],
}
with open(OUT, "w") as f:
    json.dump(out, f, indent=1)
