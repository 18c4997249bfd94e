"""tests/interop/metrics_flatten.py: the scalars fimi's trackers (TensorBoard,
MLflow) log for a metrics.jsonl line, as the interop tests expect them."""


def flatten(value, tag, out):
    """What fimi logs for one metrics.jsonl value: numbers and booleans,
    objects and arrays flattened with "/"; strings and nulls left out."""
    if isinstance(value, bool):
        out[tag] = float(value)
    elif isinstance(value, (int, float)):
        out[tag] = float(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            flatten(v, f"{tag}/{k}" if tag else k, out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            flatten(v, f"{tag}/{i}" if tag else str(i), out)
