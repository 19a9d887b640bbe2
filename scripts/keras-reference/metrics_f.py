"""Keras reference values for the F-scores, R2Score, RootMeanSquaredError, the confusion
counts and the top-k accuracies: each metric and setting streamed over two fixed batches
(the second with sample weights), its result after both.

    .strata/python/bin/python scripts/keras-reference/metrics_f.py [OUT.json]

writes runtime/tests/reference/metrics_f.json (or OUT.json): the inputs and Keras' results,
read by runtime/tests/keras_metrics_f.rs.
"""
import json
import os
import re
import sys

os.environ["KERAS_BACKEND"] = "jax"

import numpy as np  # noqa: E402
import keras  # noqa: E402

rng = np.random.default_rng(20)
BATCH = 8


def f32(a):
    return np.asarray(a, dtype=np.float32)


def weights():
    return f32(rng.uniform(0.0, 2.0, size=BATCH))


def one_hot(n, classes):
    return f32(np.eye(classes)[rng.integers(0, classes, size=n)])


def multi_hot(n, classes):
    return f32(rng.integers(0, 2, size=(n, classes)))


def probs(n, classes):
    return f32(rng.uniform(0.0, 1.0, size=(n, classes)))


def batches(make_true, make_pred):
    """Two batches: the first unweighted, the second with sample weights."""
    return [
        (make_true(), make_pred(), None),
        (make_true(), make_pred(), weights()),
    ]


cases = []


def case(name, keras_metric, metric, args, data):
    m = keras_metric
    for y, p, w in data:
        m.update_state(y, p, sample_weight=w)
    r = np.asarray(m.result(), dtype=np.float32)
    cases.append(
        {
            "name": name,
            "metric": metric,
            "args": args,
            # Keras numbers a second instance's name (`true_positives_1`); the log name
            # is the default one.
            "log_name": re.sub(r"_\d+$", "", m.name),
            "batches": [
                {
                    "y_true": {"shape": list(y.shape), "dtype": str(y.dtype), "data": [float(v) for v in y.ravel()]},
                    "y_pred": {"shape": list(p.shape), "data": [float(v) for v in p.ravel()]},
                    "sample_weight": None if w is None else [float(v) for v in w],
                }
                for y, p, w in data
            ],
            "result_shape": list(r.shape),
            "result": [float(v) for v in r.ravel()],
        }
    )


# F-scores: one-hot targets (softmax-like rows) and multi-hot ones, without and with a
# threshold, every average.
CLASSES = 4
onehot = batches(lambda: one_hot(BATCH, CLASSES), lambda: probs(BATCH, CLASSES))
multihot = batches(lambda: multi_hot(BATCH, CLASSES), lambda: probs(BATCH, CLASSES))
for average in [None, "micro", "macro", "weighted"]:
    tag = average or "none"
    case(f"f1_{tag}", keras.metrics.F1Score(average=average), "F1Score",
         {"average": average}, onehot)
    case(f"f1_{tag}_threshold", keras.metrics.F1Score(average=average, threshold=0.5),
         "F1Score", {"average": average, "threshold": 0.5}, multihot)
    case(f"fbeta2_{tag}", keras.metrics.FBetaScore(average=average, beta=2.0),
         "FBetaScore", {"average": average, "beta": 2.0}, onehot)
    case(f"fbeta05_{tag}_threshold",
         keras.metrics.FBetaScore(average=average, beta=0.5, threshold=0.4),
         "FBetaScore", {"average": average, "beta": 0.5, "threshold": 0.4}, multihot)

# Regression: three output columns of different spread.
COLS = 3
scale = f32([1.0, 3.0, 0.5])


def targets():
    return f32(rng.normal(size=(BATCH, COLS)) * scale)


reg = []
for _ in range(2):
    y = targets()
    reg.append((y, f32(y + rng.normal(scale=0.5, size=(BATCH, COLS)))))
reg = [(reg[0][0], reg[0][1], None), (reg[1][0], reg[1][1], weights())]
for agg in [None, "uniform_average", "variance_weighted_average"]:
    tag = agg or "none"
    case(f"r2_{tag}", keras.metrics.R2Score(class_aggregation=agg), "R2Score",
         {"class_aggregation": agg}, reg)
case("r2_adjusted", keras.metrics.R2Score(num_regressors=3), "R2Score",
     {"class_aggregation": "uniform_average", "num_regressors": 3}, reg)
# More regressors than values seen: Keras falls back to the plain score.
case("r2_adjusted_fallback", keras.metrics.R2Score(num_regressors=100), "R2Score",
     {"class_aggregation": "uniform_average", "num_regressors": 100}, reg)
case("rmse", keras.metrics.RootMeanSquaredError(), "RootMeanSquaredError", {}, reg)

# Confusion counts over multi-label 0/1 targets.
labels = batches(lambda: multi_hot(BATCH, COLS), lambda: probs(BATCH, COLS))
for cls in ["TruePositives", "FalsePositives", "TrueNegatives", "FalseNegatives"]:
    case(f"{cls}_default", getattr(keras.metrics, cls)(), cls, {}, labels)
    case(f"{cls}_thresholds", getattr(keras.metrics, cls)(thresholds=[0.3, 0.5, 0.7]),
         cls, {"thresholds": [0.3, 0.5, 0.7]}, labels)

# Top-k over seven classes.
K_CLASSES = 7
cat = batches(lambda: one_hot(BATCH, K_CLASSES), lambda: probs(BATCH, K_CLASSES))
sparse = batches(lambda: f32(rng.integers(0, K_CLASSES, size=(BATCH,))).astype(np.int32),
                 lambda: probs(BATCH, K_CLASSES))
for k in [None, 2]:
    args = {} if k is None else {"k": k}
    tag = "default" if k is None else f"k{k}"
    case(f"top_k_{tag}", keras.metrics.TopKCategoricalAccuracy(**args),
         "TopKCategoricalAccuracy", args, cat)
    case(f"sparse_top_k_{tag}", keras.metrics.SparseTopKCategoricalAccuracy(**args),
         "SparseTopKCategoricalAccuracy", args, sparse)

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "..", "runtime", "tests", "reference", "metrics_f.json")
with open(out, "w") as f:
    json.dump({"keras": keras.__version__, "cases": cases}, f, indent=1)
    f.write("\n")
