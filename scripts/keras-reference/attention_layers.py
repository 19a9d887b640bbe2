"""Keras 3 reference values for the layers of several inputs that multiply them: `Dot`,
`Attention` and `MultiHeadAttention`.

Run as `.strata/python/bin/python scripts/keras-reference/attention_layers.py [OUT]`;
writes `runtime/tests/reference/attention_layers.json`, which
`runtime/tests/keras_attention_layers.rs` reads.

Every case holds the layer's class and arguments (as Keras takes them), what its call
is given besides the inputs (`use_causal_mask`, an argument of Keras' call that
`model!` takes with the layer's), its float32 inputs and weights (from a fixed numpy
seed, in Keras' order and layout, set with `set_weights`), the weights' Keras paths,
and Keras' output.
"""

import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"

import keras  # noqa: E402
import numpy as np  # noqa: E402

rng = np.random.default_rng(14)
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "..", "runtime", "tests", "reference",
    "attention_layers.json",
)


def tensor(a):
    a = np.asarray(a, dtype=np.float32)
    return {
        "dtype": "f32",
        "shape": list(a.shape),
        "data": [float(v) for v in a.reshape(-1).tolist()],
    }


# (class, constructor arguments, call arguments, input shapes with the batch axis)
CASES = [
    ("Dot", dict(axes=-1), {}, [(2, 3, 4), (2, 5, 4)]),
    ("Dot", dict(axes=(1, 2), normalize=True), {}, [(2, 3, 4), (2, 5, 3)]),
    ("Dot", dict(axes=1), {}, [(2, 4), (2, 4)]),
    ("Dot", dict(axes=(2, 1)), {}, [(2, 3, 4), (2, 4)]),
    ("Attention", dict(), {}, [(2, 3, 4), (2, 5, 4)]),
    ("Attention", dict(use_scale=True), {}, [(2, 3, 4), (2, 5, 6), (2, 5, 4)]),
    ("Attention", dict(score_mode="concat"), {}, [(2, 3, 4), (2, 5, 4)]),
    ("Attention", dict(use_scale=True, score_mode="concat"), dict(use_causal_mask=True),
     [(2, 4, 3), (2, 4, 3)]),
    ("Attention", dict(), dict(use_causal_mask=True), [(2, 4, 3), (2, 5, 2), (2, 5, 3)]),
    ("MultiHeadAttention", dict(num_heads=2, key_dim=3), {}, [(2, 4, 5), (2, 6, 5)]),
    # Asking for the scores takes Keras' einsum path, which a value_dim other than key_dim
    # needs (JAX's fused dot_product_attention, the other path, refuses it).
    ("MultiHeadAttention", dict(num_heads=3, key_dim=2, value_dim=4, output_shape=7),
     dict(return_attention_scores=True), [(2, 4, 5), (2, 6, 3), (2, 6, 2)]),
    ("MultiHeadAttention", dict(num_heads=2, key_dim=4, use_bias=False),
     dict(use_causal_mask=True), [(2, 5, 6), (2, 5, 6)]),
    ("MultiHeadAttention", dict(num_heads=1, key_dim=3), dict(use_causal_mask=True),
     [(2, 3, 4), (2, 5, 4)]),
    ("MultiHeadAttention", dict(num_heads=2, key_dim=3), dict(use_causal_mask=True,
     return_attention_scores=True), [(2, 4, 3), (2, 4, 3)]),
    # An attention mask (0/1, query steps by value steps) becomes the fourth input, after
    # the key (the value when Keras is given none).
    ("MultiHeadAttention", dict(num_heads=2, key_dim=3), dict(attention_mask=True),
     [(2, 4, 5), (2, 6, 5), (2, 6, 5)]),
    ("MultiHeadAttention", dict(num_heads=2, key_dim=2, value_dim=3), dict(
     attention_mask=True, use_causal_mask=True, return_attention_scores=True),
     [(2, 5, 4), (2, 5, 4), (2, 5, 3)]),
]


def call(layer, cls, xs, kwargs):
    if cls == "MultiHeadAttention":
        key = xs[2] if len(xs) > 2 else None
        kwargs = dict(kwargs)
        if kwargs.pop("attention_mask", False):
            kwargs["attention_mask"] = xs[3]
        y = layer(xs[0], xs[1], key=key, **kwargs)
        return y[0] if kwargs.get("return_attention_scores") else y
    return layer(list(xs), **kwargs)


def case(cls, kwargs, call_kwargs, shapes):
    layer = getattr(keras.layers, cls)(**kwargs)
    xs = [rng.normal(size=s).astype(np.float32) for s in shapes]
    if call_kwargs.get("attention_mask"):
        mask = (rng.random((shapes[0][0], shapes[0][1], shapes[1][1])) < 0.6).astype(np.float32)
        mask[..., 0] = 1.0  # every query step sees at least one value step
        xs.append(mask)
    call(layer, cls, xs, call_kwargs)  # builds it
    weights = [rng.normal(size=w.shape).astype(np.float32) for w in layer.weights]
    layer.set_weights(weights)
    y = np.asarray(call(layer, cls, xs, call_kwargs))
    return {
        "class": cls,
        "args": kwargs,
        "call": call_kwargs,
        "inputs": [tensor(x) for x in xs],
        "weight_paths": [w.path for w in layer.weights],
        "weights": [tensor(w) for w in weights],
        "output": tensor(y),
    }


out = {"keras": keras.__version__, "cases": [case(*c) for c in CASES]}
with open(OUT, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
