"""Keras 3 reference values for the sequence, depthwise, separable and transposed
convolution layers, their pools and group normalisation.

Run as `.strata/python/bin/python scripts/keras-reference/spatial_layers.py`; writes
`runtime/tests/reference/spatial_layers.json`, which `runtime/tests/keras_spatial_layers.rs`
reads.

Every case holds the layer's class and arguments (as Keras takes them), its float32
input and weights (from a fixed numpy seed, in Keras' order and layout, set with
`set_weights`), and Keras' output.
"""

import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"

import keras  # noqa: E402
import numpy as np  # noqa: E402

rng = np.random.default_rng(14)
# The first argument, when given, is where to write (scripts/keras-reference/run --check).
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "..", "runtime", "tests", "reference",
    "spatial_layers.json",
)


def tensor(a):
    a = np.asarray(a, dtype=np.float32)
    return {
        "dtype": "f32",
        "shape": list(a.shape),
        "data": [float(v) for v in a.reshape(-1).tolist()],
    }


CASES = [
    ("Conv1D", dict(filters=3, kernel_size=3), (2, 7, 2)),
    ("Conv1D", dict(filters=4, kernel_size=3, strides=2, padding="same", groups=2), (2, 8, 4)),
    ("Conv1D", dict(filters=2, kernel_size=3, padding="causal", dilation_rate=2), (2, 7, 3)),
    ("MaxPooling1D", dict(pool_size=2), (2, 7, 3)),
    ("MaxPooling1D", dict(pool_size=3, strides=2, padding="same"), (2, 8, 2)),
    ("AveragePooling1D", dict(pool_size=3, strides=2, padding="same"), (2, 8, 2)),
    ("AveragePooling1D", dict(pool_size=2, strides=1), (2, 5, 2)),
    ("GlobalAveragePooling1D", dict(), (2, 5, 3)),
    ("GlobalMaxPooling1D", dict(keepdims=True), (2, 5, 3)),
    ("DepthwiseConv2D", dict(kernel_size=3, strides=2, padding="same", depth_multiplier=2), (2, 7, 6, 3)),
    ("DepthwiseConv2D", dict(kernel_size=(2, 3), strides=2, dilation_rate=2), (2, 8, 9, 2)),
    ("SeparableConv2D", dict(filters=4, kernel_size=3, padding="same", depth_multiplier=2), (2, 6, 5, 3)),
    ("SeparableConv2D", dict(filters=3, kernel_size=2, strides=2, use_bias=False), (2, 7, 7, 2)),
    ("Conv2DTranspose", dict(filters=3, kernel_size=3, strides=2, padding="same"), (2, 4, 3, 2)),
    ("Conv2DTranspose", dict(filters=2, kernel_size=3, strides=2, output_padding=1), (2, 3, 4, 2)),
    ("Conv2DTranspose", dict(filters=2, kernel_size=(4, 2), strides=(3, 2), padding="same", output_padding=(2, 1)), (2, 3, 3, 3)),
    ("Conv2DTranspose", dict(filters=2, kernel_size=2, dilation_rate=2), (2, 3, 3, 2)),
    ("GroupNormalization", dict(groups=2), (2, 3, 4, 4)),
    ("GroupNormalization", dict(groups=3, axis=1, center=False, epsilon=0.01), (2, 6, 2)),
]


def case(cls, kwargs, shape):
    layer = getattr(keras.layers, cls)(**kwargs)
    layer.build(shape)
    weights = [rng.normal(size=w.shape).astype(np.float32) for w in layer.weights]
    layer.set_weights(weights)
    x = rng.normal(size=shape).astype(np.float32)
    y = np.asarray(layer(x))
    return {
        "class": cls,
        "args": kwargs,
        "input": tensor(x),
        "weights": [tensor(w) for w in weights],
        "output": tensor(y),
    }


out = {"keras": keras.__version__, "cases": [case(*c) for c in CASES]}
with open(OUT, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
