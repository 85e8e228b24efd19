"""Values read from the Prometheus text of GET /metrics."""
import re


def metric_value(text, name, labels=None):
    """The sum of the samples of `name` whose labels include `labels` (a dict); 0.0 when none."""
    total = 0.0
    found = False
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        if head.split("{")[0] != name:
            continue
        if labels and not all('%s="%s"' % kv in head for kv in labels.items()):
            continue
        total += float(value)
        found = True
    return total if found else 0.0


def histogram(text, name):
    """Cumulative buckets [(le, count)] of a Prometheus histogram, summed over label sets."""
    buckets = {}
    for line in text.splitlines():
        if line.startswith(name + "_bucket"):
            le = re.search(r'le="([^"]+)"', line).group(1)
            buckets[le] = buckets.get(le, 0) + float(line.rpartition(" ")[2])
    items = sorted(((float("inf") if k == "+Inf" else float(k)), v) for k, v in buckets.items())
    return items


def histogram_delta(after, before):
    b = dict(before)
    return [(le, c - b.get(le, 0)) for le, c in after]


def histogram_quantile(buckets, q):
    """Upper bound of the bucket holding quantile q (as Prometheus would bound it)."""
    if not buckets or buckets[-1][1] <= 0:
        return float("nan")
    total = buckets[-1][1]
    for le, c in buckets:
        if c >= q * total:
            return le
    return float("inf")
