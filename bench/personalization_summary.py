"""Summary of bench/personalization.sh: a markdown table per condition and paired comparisons.

Reads OUT/eval/<condition>/<user>.json (`nightlora lamp2-eval --json` outputs), merges each
condition's users into OUT/eval/<condition>.json (items concatenated, the form
`nightlora lamp2-compare` reads) and prints markdown: pooled accuracy and macro-F1 per
condition (LaMP's definitions: macro-F1 over all 15 labels, unparseable = wrong), mean
per-user accuracy, training wall times, and `nightlora lamp2-compare` results (per-user and
per-item units). The statistics come from nightlora itself; this file only arranges them.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess

CONDITIONS = ["none", "retrieval", "mezo", "first-order", "torch"]
PAIRS = [("none", "first-order"), ("retrieval", "first-order"), ("mezo", "first-order"), ("first-order", "torch"),
         ("none", "mezo")]
NUM_TAGS = 15


def macro_f1(preds, golds, labels):
    f1 = []
    for lab in labels:
        tp = sum(1 for p, g in zip(preds, golds) if p == lab and g == lab)
        fp = sum(1 for p, g in zip(preds, golds) if p == lab and g != lab)
        fn = sum(1 for p, g in zip(preds, golds) if p != lab and g == lab)
        f1.append(2 * tp / (2 * tp + fp + fn) if (2 * tp + fp + fn) else 0.0)
    return sum(f1) / len(f1)


def compare(bin_, a, b, unit):
    out = subprocess.run([bin_, "lamp2-compare", "--a", a, "--b", b, "--unit", unit, "--seed", "1"],
                         capture_output=True, text=True, check=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("mean difference"))
    better = next(l for l in out.splitlines() if l.startswith("B better"))
    return line.replace("mean difference ", ""), better


def machine():
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--users", type=int, required=True)
    ap.add_argument("--command", default="")
    args = ap.parse_args()
    users = [f"u{i}" for i in range(args.users)]
    # The tag list in label order, from the data's README-independent source: nightlora's own
    # eval output names tags, so labels are compared as strings.
    rows, merged = [], {}
    for cond in CONDITIONS:
        items, user_acc = [], []
        for u in users:
            with open(os.path.join(args.out, "eval", cond, u + ".json")) as f:
                j = json.load(f)
            items += j["items"]
            its = j["items"]
            user_acc.append(sum(1 for it in its if it["predicted"] == it["gold"]) / len(its))
        path = os.path.join(args.out, "eval", cond + ".json")
        with open(path, "w") as f:
            json.dump({"items": items}, f)
        merged[cond] = path
        golds = [it["gold"] for it in items]
        preds = [it["predicted"] if isinstance(it["predicted"], str) else None for it in items]
        labels = sorted(set(golds) | {p for p in preds if p is not None})
        # Labels never gold nor predicted have F1 = 0 but still count in the mean over all 15.
        f1 = macro_f1(preds, golds, labels) * len(labels) / NUM_TAGS
        acc = sum(1 for p, g in zip(preds, golds) if p == g) / len(items)
        rows.append((cond, len(items), acc, f1, sum(user_acc) / len(user_acc)))

    def train_times(cond):
        ts = []
        for u in users:
            if cond == "torch":
                p = os.path.join(args.out, "jobs", u, "torch", "train_log.json")
            else:
                p = os.path.join(args.out, "jobs", u, cond, "runs", "0001", "trained.json")
            with open(p) as f:
                j = json.load(f)
            ts.append((j["elapsed_s"], j.get("steps", 0)))
        return ts

    print(f"# Personalization experiment ({datetime.date.today().isoformat()})\n")
    print(f"- command: `{args.command}`")
    print(f"- machine: {machine()}")
    print(f"- output: {args.out}\n")
    print("| condition | questions | accuracy | macro-F1 | mean per-user accuracy |")
    print("|---|---|---|---|---|")
    for cond, n, acc, f1, uacc in rows:
        print(f"| {cond} | {n} | {acc:.4f} | {f1:.4f} | {uacc:.4f} |")
    print("\nTraining per user (mean over users): wall time of the training steps, steps")
    print("\n| condition | mean training s | mean steps |\n|---|---|---|")
    for cond in ("first-order", "mezo", "torch"):
        ts = train_times(cond)
        print(f"| {cond} | {sum(t for t, _ in ts) / len(ts):.2f} | {sum(s for _, s in ts) / len(ts):.0f} |")
    print("\nPaired differences (B - A in accuracy; 95% percentile bootstrap CI, 10000 resamples):\n")
    print("| A | B | unit | mean difference [CI] | B better / A better / tied |\n|---|---|---|---|---|")
    for a, b in PAIRS:
        for unit in ("user", "item"):
            diff, better = compare(args.bin, merged[a], merged[b], unit)
            counts = better.replace("B better on ", "").replace(", A better on ", " / ").replace(", tied on ", " / ")
            print(f"| {a} | {b} | {unit} | {diff} | {counts} |")


if __name__ == "__main__":
    main()
