"""Keras 3 reference values for `BatchNormalization`, in training (the batch's statistics,
the moving averages' update, the gradients) and in inference (the moving statistics).

Run as `.strata/python/bin/python scripts/keras-reference/normalization_layers.py [OUT]`;
writes `runtime/tests/reference/normalization_layers.json`, which
`runtime/tests/keras_normalization_layers.rs` reads.

Every case holds the layer's arguments (as Keras takes them), whether it is called with
`training=True`, its float32 input and weights (from a fixed numpy seed, in Keras' order,
set with `set_weights`: gamma and beta away from their initial ones and 0, the moving
statistics away from 0 and 1), the weights' Keras paths, and Keras' output. The inputs sit
around 3 (each feature its own offset and spread), so a variance computed as
E[x²] - E[x]² would lose digits that the reference keeps.

A training case also holds the moving mean and variance after the call (from the layer's
own variables, as a stateful call leaves them) and, for the loss L = sum(y * w) with `w`
a fixed tensor of y's shape (written too), the gradients of L with respect to the input
and to each trainable weight, by `jax.grad` through the layer's `stateless_call` (the same
computation: the script checks that its output is the stateful call's).
"""

import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

rng = np.random.default_rng(16)
# The first argument, when given, is where to write (scripts/keras-reference/run --check).
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "..", "runtime", "tests", "reference",
    "normalization_layers.json",
)


def tensor(a):
    a = np.asarray(a, dtype=np.float32)
    return {
        "dtype": "f32",
        "shape": list(a.shape),
        "data": [float(v) for v in a.reshape(-1).tolist()],
    }


# (constructor arguments, input shape with the batch axis, training)
CASES = [
    (dict(), (4, 5, 5, 3), True),
    (dict(momentum=0.9), (3, 3, 5, 2), True),
    (dict(axis=1, epsilon=0.01), (3, 4, 6), True),
    (dict(center=False, scale=False), (8, 5), True),
    (dict(), (2, 5, 5, 3), False),
]


def weight(path, n):
    name = path.rsplit("/", 1)[1]
    if name == "gamma":
        return rng.uniform(0.5, 2.0, size=n)
    if name == "beta":
        return rng.normal(size=n)
    if name == "moving_mean":
        return 3.0 + rng.normal(size=n)
    if name == "moving_variance":
        return rng.uniform(0.5, 3.0, size=n)
    raise ValueError(path)


def case(kwargs, shape, training):
    layer = keras.layers.BatchNormalization(**kwargs)
    layer.build(shape)
    weights = [weight(w.path, w.shape[0]).astype(np.float32) for w in layer.weights]
    layer.set_weights(weights)
    axis = kwargs.get("axis", -1) % len(shape)
    features = [1] * len(shape)
    features[axis] = shape[axis]
    offset = 3.0 + rng.uniform(-1.0, 1.0, size=features)
    spread = rng.uniform(0.5, 2.0, size=features)
    x = (offset + spread * rng.normal(size=shape)).astype(np.float32)
    out = {
        "args": kwargs,
        "training": training,
        "input": tensor(x),
        "weight_paths": [w.path for w in layer.weights],
        "weights": [tensor(w) for w in weights],
    }
    if not training:
        out["output"] = tensor(layer(x, training=False))
        return out

    w = rng.normal(size=shape).astype(np.float32)
    trainable = [v.value for v in layer.trainable_variables]
    state = [v.value for v in layer.non_trainable_variables]

    def loss(x, trainable):
        y, _ = layer.stateless_call(trainable, state, x, training=True)
        return jnp.sum(y * w), y

    (_, y_stateless), (dx, dweights) = jax.value_and_grad(
        loss, argnums=(0, 1), has_aux=True
    )(jnp.asarray(x), trainable)
    y = np.asarray(layer(x, training=True))
    assert np.allclose(y, np.asarray(y_stateless), rtol=1e-6, atol=1e-6)
    grads = {"x": tensor(dx)}
    for v, d in zip(layer.trainable_variables, dweights):
        grads[v.path.rsplit("/", 1)[1]] = tensor(d)
    out.update({
        "output": tensor(y),
        "moving_mean": tensor(layer.moving_mean.value),
        "moving_variance": tensor(layer.moving_variance.value),
        "loss_weights": tensor(w),
        "gradients": grads,
    })
    return out


out = {"keras": keras.__version__, "cases": [case(*c) for c in CASES]}
with open(OUT, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
