"""Rank statistics for the scripts beside it (standard library only: Debian 12's python3 is 3.11,
whose statistics.correlation has no method='ranked')."""
import statistics


def ranks(values):
    """Ranks from 0, ties given their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0
        i = j + 1
    return r


def spearman(a, b):
    """Spearman's rank correlation; None for fewer than 3 values or a constant side."""
    if len(a) < 3:
        return None
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return num / den if den > 0 else None


def pair_accuracy(scores, times):
    """Share of the pairs with distinct scores and distinct times that the scores order as the
    times (lower is faster for both); NaN without such pairs. No minimum gap between times."""
    agree = total = 0
    n = len(scores)
    for i in range(n):
        for j in range(i + 1, n):
            if times[i] == times[j] or scores[i] == scores[j]:
                continue
            total += 1
            agree += (scores[i] < scores[j]) == (times[i] < times[j])
    return agree / total if total else float("nan")
