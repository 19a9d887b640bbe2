"""Compares a committed reference file with a freshly generated one: the same structure,
every string and integer equal, every float within 1e-5 relative plus 1e-6 absolute (a few
f32 ulps), so a different CPU's last bits pass and a changed Keras value does not. XLA CPU
sums in another order where the vector width differs (AVX2 against AVX-512), which moves
float32 results by an ulp or two: on values near 16 that is 2e-6."""
import json
import math
import sys


def diff(a, b, path):
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(a)} vs {sorted(b)}"
        for k in a:
            d = diff(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = diff(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
            return f"{path}: {a!r} vs {b!r}"
        if math.isnan(a) and math.isnan(b):
            return None
        if a == b or abs(a - b) <= 1e-6 + 1e-5 * abs(b):
            return None
        return f"{path}: committed {a!r}, Keras now gives {b!r}"
    return None if a == b else f"{path}: {a!r} vs {b!r}"


committed, fresh = sys.argv[1], sys.argv[2]
with open(committed) as f:
    a = json.load(f)
with open(fresh) as f:
    b = json.load(f)
d = diff(a, b, "")
if d:
    sys.exit(f"keras-reference: {committed} is not what Keras writes now: {d}")
