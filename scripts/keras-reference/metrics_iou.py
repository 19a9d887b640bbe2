"""Keras reference values for the IoU and threshold metrics (issue 20).

Run from the repository root:

    .strata/python/bin/python scripts/keras-reference/metrics_iou.py

Writes runtime/tests/reference/metrics_iou.json: for each metric and setting, the inputs
of two `update_state` calls (the second with per-sample weights) and Keras' result after
them. `runtime/tests/keras_metrics_iou.rs` replays the inputs through Strata's metrics.

Sample weights are stored per sample (`[batch]`), which is what a Strata step gives a
metric; for targets with more than one element per sample they are repeated over the
sample's elements before Keras sees them. The IoU metrics are built with
`dtype="float32"`: Keras' default integer confusion matrix truncates fractional weights,
while Strata keeps them (see runtime/src/metrics/iou.rs).
"""

import json
import os
import sys
import re

os.environ["KERAS_BACKEND"] = "jax"

import numpy as np  # noqa: E402
import keras  # noqa: E402

# The first argument, when given, is where to write (scripts/keras-reference/run --check).
OUT = (
    sys.argv[1]
    if len(sys.argv) > 1
    else os.path.join("runtime", "tests", "reference", "metrics_iou.json")
)
rng = np.random.default_rng(20)


def tensor(a):
    a = np.asarray(a)
    if a.dtype.kind == "f":
        a = a.astype(np.float32)
        dtype = "float32"
        values = [float(v) for v in a.reshape(-1)]
    else:
        a = a.astype(np.int32)
        dtype = "int32"
        values = [int(v) for v in a.reshape(-1)]
    return {"dtype": dtype, "dims": list(a.shape), "values": values}


def weights(n):
    return rng.uniform(0.0, 2.0, size=n).astype(np.float32)


def expand_weight(sw, y, dense):
    """Per-sample weights repeated over each sample's labels (the class axis of dense
    targets is not a label), flat as Keras flattens the labels."""
    y = np.asarray(y)
    per = int(np.prod(y.shape[1:]))
    if dense:
        per //= y.shape[dense["axis"]]
    return np.repeat(sw, per)


cases = []


def case(name, metric, args, batches, keras_args=None, iou=False, keras_batches=None):
    """Two batches: `(y_true, y_pred)` pairs; the second gets random per-sample weights.
    `keras_batches`, when given, are what Keras sees in place of `batches` (the same data
    laid out differently), and `keras_args` replace entries of `args` for Keras."""
    kw = dict(args)
    if keras_args:
        kw.update(keras_args)
    if iou:
        kw["dtype"] = "float32"
    m = getattr(keras.metrics, metric)(**kw)
    stored = []
    for i, (y, p) in enumerate(batches):
        y = np.asarray(y)
        p = np.asarray(p, dtype=np.float32)
        ky, kp = (y, p) if keras_batches is None else keras_batches[i]
        if i == 0:
            sw = None
            m.update_state(ky, kp)
        else:
            sw = weights(y.shape[0])
            dense = None
            if metric.startswith("OneHot") or kw.get("sparse_y_true") is False:
                dense = {"axis": kw.get("axis", -1)}
            ksw = expand_weight(sw, ky, dense) if iou else sw
            m.update_state(ky, kp, sample_weight=ksw)
        stored.append(
            {
                "y_true": tensor(y),
                "y_pred": tensor(p),
                "sample_weight": None if sw is None else [float(v) for v in sw],
            }
        )
    result = float(np.asarray(m.result()))
    cases.append(
        {
            "name": name,
            "metric": metric,
            "args": args,
            # Keras numbers repeated names (auc_1, ...); the base name is the log name.
            "keras_name": re.sub(r"_[0-9]+$", "", m.name),
            "batches": stored,
            "result": result,
        }
    )


def labels(shape, classes):
    return rng.integers(0, classes, size=shape).astype(np.int32)


def probs(shape):
    x = rng.uniform(0.0, 1.0, size=shape).astype(np.float32)
    return x / x.sum(axis=-1, keepdims=True)


def onehot(idx, classes, axis=-1):
    o = np.eye(classes, dtype=np.float32)[idx]
    if axis != -1:
        o = np.moveaxis(o, -1, axis)
    return o


# ---- IoU family ---------------------------------------------------------------------
C = 3
ys = [labels(10, C), labels(8, C)]
ps = [labels(10, C).astype(np.float32), labels(8, C).astype(np.float32)]
sparse = list(zip(ys, ps))
case("iou_class0", "IoU", {"num_classes": C, "target_class_ids": [0]}, sparse, iou=True)
case("iou_class12", "IoU", {"num_classes": C, "target_class_ids": [1, 2]}, sparse, iou=True)
case("iou_repeated_ids", "IoU", {"num_classes": C, "target_class_ids": [2, 2, 0]}, sparse, iou=True)
case("mean_iou", "MeanIoU", {"num_classes": C}, sparse, iou=True)
case("mean_iou_4_classes_one_unseen", "MeanIoU", {"num_classes": 4}, sparse, iou=True)

# Segmentation-shaped labels [batch, h, w]; predictions out of range are left out.
seg_y = [labels((2, 3, 4), C), labels((3, 3, 4), C)]
seg_p = [labels((2, 3, 4), C + 1).astype(np.float32), labels((3, 3, 4), C).astype(np.float32)]
case("mean_iou_segmentation", "MeanIoU", {"num_classes": C}, list(zip(seg_y, seg_p)), iou=True)

# ignore_class: a void label -1 (and 255) left out.
ig_y = [np.array([0, 1, -1, 2, 2, -1, 1, 0], np.int32), np.array([2, -1, 1, 1, 0, 0], np.int32)]
ig_p = [labels(8, C).astype(np.float32), labels(6, C).astype(np.float32)]
case("mean_iou_ignore_minus1", "MeanIoU", {"num_classes": C, "ignore_class": -1},
     list(zip(ig_y, ig_p)), iou=True)
ig2_y = [np.array([0, 1, 2, 2, 1, 0, 1, 2], np.int32), np.array([2, 0, 1, 1, 0, 0], np.int32)]
case("iou_ignore_class_1", "IoU", {"num_classes": C, "target_class_ids": [0, 2], "ignore_class": 1},
     list(zip(ig2_y, ig_p)), iou=True)

# Dense predictions (argmax), dense targets.
dp = [probs((10, C)), probs((8, C))]
case("mean_iou_dense_pred", "MeanIoU", {"num_classes": C, "sparse_y_pred": False},
     list(zip(ys, dp)), iou=True)
oh = [onehot(ys[0], C), onehot(ys[1], C)]
case("iou_dense_both", "IoU", {"num_classes": C, "target_class_ids": [1], "sparse_y_true": False,
                               "sparse_y_pred": False}, list(zip(oh, dp)), iou=True)
case("one_hot_iou", "OneHotIoU", {"num_classes": C, "target_class_ids": [0, 2]},
     list(zip(oh, dp)), iou=True)
case("one_hot_mean_iou", "OneHotMeanIoU", {"num_classes": C}, list(zip(oh, dp)), iou=True)
case("one_hot_mean_iou_sparse_pred", "OneHotMeanIoU", {"num_classes": C, "sparse_y_pred": True},
     list(zip(oh, ps)), iou=True)
# Class axis 1 ("channels first") of [batch, classes, width]. Keras' result() sums the
# per-class IoUs along `axis` too, which fails for any axis but the last, so Keras gets the
# same data channels-last with axis -1.
cf_idx = [labels((2, 4), C), labels((3, 4), C)]
cl_y = [onehot(cf_idx[0], C), onehot(cf_idx[1], C)]
cl_p = [probs((2, 4, C)), probs((3, 4, C))]
cf = [(np.moveaxis(y, -1, 1), np.moveaxis(p, -1, 1)) for y, p in zip(cl_y, cl_p)]
case("one_hot_mean_iou_axis1", "OneHotMeanIoU", {"num_classes": C, "axis": 1}, cf,
     keras_args={"axis": -1}, iou=True, keras_batches=list(zip(cl_y, cl_p)))

# BinaryIoU: predictions >= threshold are class 1.
by = [labels((10, 1), 2), labels((8, 1), 2)]
bp = [rng.uniform(0, 1, (10, 1)).astype(np.float32), rng.uniform(0, 1, (8, 1)).astype(np.float32)]
bp[0][0, 0] = 0.5  # exactly at the threshold: class 1
case("binary_iou_default", "BinaryIoU", {}, list(zip(by, bp)), iou=True)
case("binary_iou_class1_t03", "BinaryIoU", {"target_class_ids": [1], "threshold": 0.3},
     list(zip(by, bp)), iou=True)
case("binary_iou_class0", "BinaryIoU", {"target_class_ids": [0]}, list(zip(by, bp)), iou=True)

# ---- threshold metrics ----------------------------------------------------------------
def scores(y):
    """Scores in [0, 1] that lean towards the labels, so the curves are not trivial."""
    return (0.2 * y + 0.65 * rng.uniform(0, 1, y.shape)).astype(np.float32)


ty = [labels((40, 1), 2).astype(np.float32), labels((30, 1), 2).astype(np.float32)]
tp_ = [scores(ty[0]), scores(ty[1])]
# Predictions exactly on the grid's ends and middle.
tp_[0][0, 0], tp_[0][1, 0], tp_[0][2, 0] = 0.0, 1.0, 0.5
binary = list(zip(ty, tp_))
case("precision_at_recall_05", "PrecisionAtRecall", {"recall": 0.5}, binary)
case("precision_at_recall_08_n1", "PrecisionAtRecall", {"recall": 0.8, "num_thresholds": 1}, binary)
case("precision_at_recall_1_n2", "PrecisionAtRecall", {"recall": 1.0, "num_thresholds": 2}, binary)
case("recall_at_precision_075", "RecallAtPrecision", {"precision": 0.75}, binary)
case("recall_at_precision_09_n50", "RecallAtPrecision", {"precision": 0.9, "num_thresholds": 50}, binary)
case("sensitivity_at_specificity_05", "SensitivityAtSpecificity", {"specificity": 0.5}, binary)
case("sensitivity_at_specificity_09_n7", "SensitivityAtSpecificity",
     {"specificity": 0.9, "num_thresholds": 7}, binary)
case("specificity_at_sensitivity_07", "SpecificityAtSensitivity", {"sensitivity": 0.7}, binary)
case("specificity_at_sensitivity_0", "SpecificityAtSensitivity", {"sensitivity": 0.0}, binary)
case("precision_default", "Precision", {}, binary)
case("recall_default", "Recall", {}, binary)

my = [labels((24, 3), 2).astype(np.float32), labels((20, 3), 2).astype(np.float32)]
mp = [scores(my[0]), scores(my[1])]
multi = list(zip(my, mp))
case("precision_at_recall_class1", "PrecisionAtRecall", {"recall": 0.6, "class_id": 1}, multi)
case("specificity_at_sensitivity_class2", "SpecificityAtSensitivity",
     {"sensitivity": 0.5, "class_id": 2}, multi)

# Precision / Recall with one threshold, top_k and class_id over [batch, 5] scores (ties
# included: top_k keeps the first of equal scores).
ky = [labels((12, 5), 2).astype(np.float32), labels((10, 5), 2).astype(np.float32)]
kp = [scores(ky[0]), scores(ky[1])]
kp[0][0, :] = [0.4, 0.7, 0.7, 0.1, 0.7]
topk = list(zip(ky, kp))
case("precision_threshold_03", "Precision", {"thresholds": 0.3}, binary)
case("recall_threshold_07", "Recall", {"thresholds": 0.7}, binary)
case("precision_top_k2", "Precision", {"top_k": 2}, topk)
case("recall_top_k2", "Recall", {"top_k": 2}, topk)
case("precision_class_id3", "Precision", {"class_id": 3}, topk)
case("recall_top_k1_class_id1", "Recall", {"top_k": 1, "class_id": 1}, topk)
case("precision_top_k3_threshold_05", "Precision", {"top_k": 3, "thresholds": 0.5}, topk)

# ---- AUC --------------------------------------------------------------------------------
case("auc_default", "AUC", {}, binary)
case("auc_pr", "AUC", {"curve": "PR"}, binary)
case("auc_pr_majoring", "AUC", {"curve": "PR", "summation_method": "majoring"}, binary)
case("auc_pr_minoring", "AUC", {"curve": "PR", "summation_method": "minoring"}, binary)
case("auc_roc_minoring", "AUC", {"summation_method": "minoring"}, binary)
case("auc_roc_majoring_n7", "AUC", {"summation_method": "majoring", "num_thresholds": 7}, binary)
case("auc_prgain", "AUC", {"curve": "PRGAIN"}, binary)
case("auc_thresholds_uneven", "AUC", {"thresholds": [0.9, 0.3, 0.5]}, binary)
case("auc_thresholds_even", "AUC", {"curve": "PR", "thresholds": [0.25, 0.5, 0.75]}, binary)
case("auc_multi_element", "AUC", {"curve": "PR"}, multi)
case("auc_label_weights", "AUC", {"label_weights": [0.5, 2.0, 1.0]}, multi)
case("auc_multi_label", "AUC", {"multi_label": True, "num_labels": 3}, multi)
case("auc_multi_label_pr_weighted", "AUC",
     {"curve": "PR", "multi_label": True, "num_labels": 3, "label_weights": [0.2, 1.0, 0.0]}, multi)
case("auc_multi_label_uneven", "AUC",
     {"multi_label": True, "num_labels": 3, "thresholds": [0.2, 0.7]}, multi)
logits = [(rng.normal(0, 2, y.shape) + 1.5 * y).astype(np.float32) for y in ty]
case("auc_from_logits_pr", "AUC", {"curve": "PR", "from_logits": True}, list(zip(ty, logits)))
# Predictions outside [0, 1] are clipped by the bucketed counting.
outside = [tp_[0].copy(), tp_[1].copy()]
outside[0][3, 0], outside[0][4, 0] = 1.3, -0.2
case("auc_clipped", "AUC", {}, list(zip(ty, outside)))

os.makedirs(os.path.dirname(os.path.abspath(OUT)), exist_ok=True)
with open(OUT, "w") as f:
    json.dump({"keras_version": keras.__version__, "cases": cases}, f, indent=1)
    f.write("\n")
print(f"wrote {len(cases)} cases to {OUT}")
