"""What the benchmark scripts' summaries share: the per-run JSON of a results folder."""
import glob
import json


def runs(results, pattern):
    """The records of `results/PATTERN-*.json`, in name order; a run cut short (no JSON) left out."""
    found = []
    for path in sorted(glob.glob(f"{results}/{pattern}-*.json")):
        try:
            with open(path) as handle:
                found.append(json.load(handle))
        except ValueError:
            pass
    return found


def paired_ratio(results, numerator, denominator, value):
    """The median of each round's own NUMERATOR / DENOMINATOR (`PATTERN-ROUND.json`, each read by
    `value`, a function of the record), and the smallest and largest of them: the two runs of a round
    follow one another, so what a shared machine does to both cancels, where a ratio of the two
    medians keeps it. None without a pair."""
    def by_round(pattern):
        found = {}
        for path in glob.glob(f"{results}/{pattern}-*.json"):
            try:
                with open(path) as handle:
                    found[path.rsplit("-", 1)[1]] = value(json.load(handle))
            except (ValueError, KeyError):
                pass
        return found
    top, bottom = by_round(numerator), by_round(denominator)
    ratios = sorted(top[r] / bottom[r] for r in top.keys() & bottom.keys() if bottom[r])
    if not ratios:
        return None
    middle = len(ratios) // 2
    median = ratios[middle] if len(ratios) % 2 else (ratios[middle - 1] + ratios[middle]) / 2
    return median, ratios[0], ratios[-1]
