"""Keras reference values for the optimizers Strata added in issue 20 (Adadelta,
Adafactor, Ftrl, Lamb), for `use_ema` / `ema_overwrite_frequency` / `SwapEMAWeights`, and
for `gradient_accumulation_steps` (issue 15; with clipping, weight decay and the EMA).

Each case trains the same tiny model (Dense(3, tanh) on 4 features, then Dense(2)), from
fixed weights, full-batch on fixed data with mean squared error, without shuffling, and
records: the weights at the end of the last epoch (before `fit` ends), the weights after
`fit` (with `use_ema`, Keras' `finalize_variable_values` writes the averages into them),
the optimizer's moving averages when it keeps them, and the history. The Dense kernel is
rank 2 and the bias rank 1, so Adafactor's factored and unfactored paths both run.

Run: .strata/python/bin/python scripts/keras-reference/optimizers.py
Writes runtime/tests/reference/optimizers.json (or the path given as the first argument).
"""

import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"

import keras  # noqa: E402
import numpy as np  # noqa: E402

OUT = os.path.join(
    os.path.dirname(__file__), "..", "..", "runtime", "tests", "reference", "optimizers.json"
)

rng = np.random.default_rng(20)
N, FEATURES, HIDDEN, OUTPUTS = 8, 4, 3, 2
x = rng.normal(size=(N, FEATURES)).astype(np.float32)
y = rng.normal(size=(N, OUTPUTS)).astype(np.float32)
vx = rng.normal(size=(4, FEATURES)).astype(np.float32)
vy = rng.normal(size=(4, OUTPUTS)).astype(np.float32)
init = {
    "dense/kernel": (rng.normal(size=(FEATURES, HIDDEN)) * 0.5).astype(np.float32),
    "dense/bias": (rng.normal(size=(HIDDEN,)) * 0.1).astype(np.float32),
    "dense_1/kernel": (rng.normal(size=(HIDDEN, OUTPUTS)) * 0.5).astype(np.float32),
    "dense_1/bias": (rng.normal(size=(OUTPUTS,)) * 0.1).astype(np.float32),
}
NAMES = list(init)

# name, optimizer class, its arguments (Keras names), epochs, extra: validation + SwapEMAWeights
CASES = [
    ("adadelta_default_lr1", "Adadelta", {"learning_rate": 1.0}, 5, None),
    ("adadelta_rho_eps", "Adadelta", {"learning_rate": 0.5, "rho": 0.8, "epsilon": 1e-4}, 5, None),
    ("adafactor_default", "Adafactor", {"learning_rate": 0.01}, 5, None),
    (
        "adafactor_settings",
        "Adafactor",
        {
            "learning_rate": 0.1,
            "beta_2_decay": -0.5,
            "epsilon_1": 1e-20,
            "epsilon_2": 1e-2,
            "clip_threshold": 0.5,
        },
        5,
        None,
    ),
    ("ftrl_default", "Ftrl", {"learning_rate": 0.1}, 5, None),
    (
        "ftrl_regularised",
        "Ftrl",
        {
            "learning_rate": 0.2,
            "learning_rate_power": -0.6,
            "initial_accumulator_value": 0.2,
            "l1_regularization_strength": 0.01,
            "l2_regularization_strength": 0.02,
            "l2_shrinkage_regularization_strength": 0.03,
            "beta": 0.1,
        },
        5,
        None,
    ),
    ("lamb_default", "Lamb", {"learning_rate": 0.01}, 5, None),
    (
        "lamb_weight_decay",
        "Lamb",
        {"learning_rate": 0.02, "beta_1": 0.8, "beta_2": 0.99, "epsilon": 1e-6, "weight_decay": 0.05},
        5,
        None,
    ),
    ("adam_ema", "Adam", {"learning_rate": 0.05, "use_ema": True, "ema_momentum": 0.9}, 5, None),
    (
        "adam_ema_overwrite",
        "Adam",
        {"learning_rate": 0.05, "use_ema": True, "ema_momentum": 0.8, "ema_overwrite_frequency": 2},
        5,
        None,
    ),
    (
        "sgd_ema_overwrite",
        "SGD",
        {
            "learning_rate": 0.1,
            "momentum": 0.5,
            "use_ema": True,
            "ema_momentum": 0.7,
            "ema_overwrite_frequency": 3,
        },
        7,
        None,
    ),
    (
        "adam_swap_ema_validation",
        "Adam",
        {"learning_rate": 0.05, "use_ema": True, "ema_momentum": 0.6},
        3,
        {"swap_on_epoch": False},
    ),
    (
        "sgd_swap_ema_on_epoch",
        "SGD",
        {"learning_rate": 0.1, "use_ema": True, "ema_momentum": 0.5},
        3,
        {"swap_on_epoch": True},
    ),
    ("adam_accumulate", "Adam", {"learning_rate": 0.05, "gradient_accumulation_steps": 2}, 6, None),
    (
        "sgd_accumulate_clip_decay",
        "SGD",
        {
            "learning_rate": 0.1,
            "momentum": 0.5,
            "gradient_accumulation_steps": 3,
            "clipnorm": 0.3,
            "weight_decay": 0.05,
        },
        8,
        None,
    ),
    (
        "adam_accumulate_ema",
        "Adam",
        {
            "learning_rate": 0.05,
            "gradient_accumulation_steps": 2,
            "use_ema": True,
            "ema_momentum": 0.8,
            "ema_overwrite_frequency": 2,
        },
        7,
        None,
    ),
]


def model():
    m = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(HIDDEN, activation="tanh", name="dense"),
            keras.layers.Dense(OUTPUTS, name="dense_1"),
        ]
    )
    m.set_weights([init[n] for n in NAMES])
    return m


def values(variables):
    return [np.asarray(v).astype(np.float32).tolist() for v in variables]


class LastEpochWeights(keras.callbacks.Callback):
    """The model's weights at each epoch's end (after any callback before it)."""

    def on_epoch_end(self, epoch, logs=None):
        self.weights = values(self.model.get_weights())


def run(name, cls, args, epochs, swap):
    m = model()
    opt = getattr(keras.optimizers, cls)(**args)
    m.compile(optimizer=opt, loss="mean_squared_error")
    callbacks = []
    fit = {}
    if swap is not None:
        callbacks.append(keras.callbacks.SwapEMAWeights(swap_on_epoch=swap["swap_on_epoch"]))
        fit["validation_data"] = (vx, vy)
    last = LastEpochWeights()
    callbacks.append(last)
    h = m.fit(x, y, batch_size=N, epochs=epochs, shuffle=False, verbose=0, callbacks=callbacks, **fit)
    case = {
        "name": name,
        "optimizer": cls,
        "args": args,
        "epochs": epochs,
        "swap_ema": swap,
        "weights_at_last_epoch_end": last.weights,
        "weights_after_fit": values(m.get_weights()),
        "history": {k: [float(v) for v in vs] for k, vs in h.history.items()},
    }
    if args.get("use_ema"):
        case["ema"] = values(opt._model_variables_moving_average)
    return case


def main():
    out = {
        "keras_version": keras.__version__,
        "x": x.tolist(),
        "y": y.tolist(),
        "val_x": vx.tolist(),
        "val_y": vy.tolist(),
        "names": NAMES,
        "init": [init[n].tolist() for n in NAMES],
        "cases": [run(*c) for c in CASES],
    }
    with open(sys.argv[1] if len(sys.argv) > 1 else OUT, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
