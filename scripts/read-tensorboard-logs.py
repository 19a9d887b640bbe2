"""Reads a TensorBoard log directory with TensorBoard's own loaders; prints JSON.

    .strata/python/bin/python scripts/read-tensorboard-logs.py <log_dir>

Used by runtime/tests/tensorboard.rs to check the event files Strata's TensorBoard callback
writes. Three readings, so that a file only one loader accepts does not pass:

- "records": every file framed by hand, each record's masked CRC-32C checked with
  TensorBoard's `masked_crc32c`, no bytes left over, the first event the file version;
- "scalars" / "histograms": the data provider TensorBoard's dashboards use
  (plugin_event_multiplexer + MultiplexerDataProvider), by run and tag, as
  [step, value] and [step, [[left, right, count], ...]];
- "legacy": the older `event_accumulator.EventAccumulator`, each run's tensor tags with
  their [step, value-or-rows].

Exits non-zero (with a message on stderr) when a file is damaged.
"""

import json
import os
import struct
import sys

from tensorboard.backend.event_processing import data_provider
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing import plugin_event_multiplexer
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import pywrap_tensorflow
from tensorboard import context
from tensorboard.util import tensor_util


def read_records(path):
    with open(path, "rb") as f:
        data = f.read()
    events, at = [], 0
    while at < len(data):
        if len(data) - at < 12:
            sys.exit(f"{path}: {len(data) - at} stray bytes at offset {at}")
        header = data[at : at + 8]
        (length,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", data[at + 8 : at + 12])
        if crc != pywrap_tensorflow.masked_crc32c(header):
            sys.exit(f"{path}: bad length CRC at offset {at}")
        body = data[at + 12 : at + 12 + length]
        tail = data[at + 12 + length : at + 16 + length]
        if len(body) != length or len(tail) != 4:
            sys.exit(f"{path}: record at offset {at} is cut short")
        if struct.unpack("<I", tail)[0] != pywrap_tensorflow.masked_crc32c(body):
            sys.exit(f"{path}: bad data CRC at offset {at}")
        e = event_pb2.Event()
        e.ParseFromString(body)
        events.append(e)
        at += 16 + length
    if not events or events[0].file_version != "brain.Event:2":
        sys.exit(f"{path}: the first event is not the file version")
    return len(events)


def main(logdir):
    out = {"records": {}, "scalars": {}, "histograms": {}, "legacy": {}}
    for root, _, files in sorted(os.walk(logdir)):
        for name in sorted(files):
            run = os.path.relpath(root, logdir)
            out["records"].setdefault(run, {})[name] = read_records(os.path.join(root, name))

    mux = plugin_event_multiplexer.EventMultiplexer(
        size_guidance={event_accumulator.TENSORS: 0},
        tensor_size_guidance={"scalars": 0, "histograms": 0},
    )
    mux.AddRunsFromDirectory(logdir)
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, logdir)
    ctx = context.RequestContext()
    big = 10**9
    scalars = provider.read_scalars(
        ctx, experiment_id="", plugin_name="scalars", downsample=big
    )
    for run, tags in scalars.items():
        out["scalars"][run] = {
            tag: [[d.step, d.value] for d in data] for tag, data in tags.items()
        }
    tensors = provider.read_tensors(
        ctx, experiment_id="", plugin_name="histograms", downsample=big
    )
    for run, tags in tensors.items():
        out["histograms"][run] = {
            tag: [[d.step, d.numpy.tolist()] for d in data] for tag, data in tags.items()
        }

    for run in out["records"]:
        acc = event_accumulator.EventAccumulator(
            os.path.join(logdir, run), size_guidance={event_accumulator.TENSORS: 0}
        )
        acc.Reload()
        out["legacy"][run] = {
            tag: [
                [t.step, tensor_util.make_ndarray(t.tensor_proto).tolist()]
                for t in acc.Tensors(tag)
            ]
            for tag in acc.Tags()["tensors"]
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
