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
