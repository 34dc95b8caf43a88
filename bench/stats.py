"""Shared by the benchmark scripts: summary statistics of samples."""


def pct(xs, p):
    """Percentile with linear interpolation between closest ranks; None for no samples."""
    if not xs:
        return None
    s = sorted(xs)
    k = (len(s) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)
