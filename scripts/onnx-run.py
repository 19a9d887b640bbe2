#!/usr/bin/env python3
"""Checks and runs a model written by Strata's `Model::export_onnx`, for its tests.

Usage: onnx-run.py MODEL.onnx INPUT.npy...

Validates MODEL with onnx.checker (full_check: types and shapes inferred through every
node), then runs it with onnxruntime on the CPU for each INPUT.npy (the model's one
input), twice: with onnxruntime's graph optimizations (its default: operator fusions)
and with none (each node as written). Saves the one output of each run beside the input,
as INPUT.opt.npy and INPUT.plain.npy. Prints on stdout a JSON summary of the model: IR
version, operator sets, the graph's inputs and outputs (name, element type, dims: an int
or the name of a symbolic one), initializer names and the operator types used.
"""

import json
import sys

import numpy as np
import onnx
import onnxruntime as ort


def dims(value_info):
    shape = value_info.type.tensor_type.shape
    return [d.dim_param if d.HasField("dim_param") else d.dim_value for d in shape.dim]


def describe(value_info):
    elem = value_info.type.tensor_type.elem_type
    return {
        "name": value_info.name,
        "elem_type": onnx.TensorProto.DataType.Name(elem),
        "dims": dims(value_info),
    }


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, inputs = sys.argv[1], sys.argv[2:]
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    graph = model.graph
    summary = {
        "ir_version": model.ir_version,
        "opsets": {o.domain: o.version for o in model.opset_import},
        "inputs": [describe(v) for v in graph.input],
        "outputs": [describe(v) for v in graph.output],
        "initializers": [t.name for t in graph.initializer],
        "op_types": sorted({n.op_type for n in graph.node}),
    }
    levels = {
        "opt": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        "plain": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    }
    for suffix, level in levels.items():
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        session = ort.InferenceSession(
            path, options, providers=["CPUExecutionProvider"]
        )
        name = session.get_inputs()[0].name
        for x_path in inputs:
            (y,) = session.run(None, {name: np.load(x_path)})
            np.save(x_path[: -len(".npy")] + f".{suffix}.npy", y)
    json.dump(summary, sys.stdout)


if __name__ == "__main__":
    main()
