"""Test error against training time, per method and data set (``docs/choosing.md``).

The figures are copied by hand from the benchmark tables named in the ``source``
column of ``FIGURES`` (nothing is re-run).  Time is the training time in process CPU
seconds (all threads) where the source table gives it, which does not depend on the
other load of the shared benchmark machine; the k q-metrics tables give wall-clock
seconds only (marked ``wall``).  Writes ``docs/choosing_error_time.png``::

    python docs/plot_choosing.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OUT = Path(__file__).resolve().parent / "choosing_error_time.png"

# data set, method key, test error %, training seconds, "cpu" or "wall", source file, options
FIGURES = [
    # banana: 2 features, 3533 training rows
    ("banana", "linear", 44.37, 0.0, "cpu", "llc_jo.md", "liblinear -s 1 -B 1 -c 1"),
    ("banana", "rbf", 9.51, 0.4, "cpu", "llc_jo.md", "libsvm -t 2 -c 10 -g 0.5"),
    ("banana", "llsvm", 10.18, 0.1, "cpu", "llc_jo.md",
     "-s 31 -L 2 -f 0 -B 1 -P 10 -T 100000 -E 30 -A 50 -k 8 -u 1 -c 3"),
    ("banana", "sapl", 10.04, 0.1, "cpu", "llc_jo.md",
     "-s 31 -L 2 -B 1 -P 10 -T 100000 -E 30 -A 100 -k 8 -u 1 -f 1000 -c 3"),
    ("banana", "jo", 9.62, 3.5, "cpu", "llc_jo.md",
     "-s 31 -L 3 -j 0 -B 1 -P 10 -T 100000 -E 200 -A 400 -u 1 -f 1000 -c 1"),
    # magic04: 10 features in [0, 1], 12680 training rows
    ("magic04", "linear", 21.18, 0.2, "cpu", "llc_jo.md", "liblinear -s 1 -B 1 -c 10"),
    ("magic04", "rbf", 13.93, 27.7, "cpu", "llc_jo.md", "libsvm -t 2 -c 10 -g 5"),
    ("magic04", "llsvm", 20.04, 0.7, "cpu", "llc_jo.md",
     "-s 31 -L 2 -f 0 -B 1 -P 10 -T 100000 -E 30 -A 100 -k 5 -u 5 -c 1"),
    ("magic04", "sapl", 14.76, 0.8, "cpu", "llc_jo.md",
     "-s 31 -L 2 -B 1 -P 10 -T 100000 -E 30 -A 100 -k 5 -u 5 -f 1000 -c 1"),
    ("magic04", "jo", 14.61, 0.9, "cpu", "llc_jo.md",
     "-s 31 -L 3 -j 0 -B 1 -P 10 -T 100000 -E 30 -A 100 -u 10 -f 300 -c 0.3"),
    # ijcnn1: 22 features, 49990 training rows
    ("ijcnn1", "linear", 8.20, 2.3, "cpu", "llc_jo.md", "liblinear -s 1 -B 1 -c 10"),
    ("ijcnn1", "rbf", 1.30, 37.2, "cpu", "llc_jo.md", "libsvm -t 2 -c 32 -g 2"),
    ("ijcnn1", "llsvm", 3.03, 1.4, "cpu", "llc_jo.md",
     "-s 31 -L 2 -f 0 -B 1 -P 10 -T 100000 -E 10 -A 100 -k 8 -c 10 -u 10"),
    ("ijcnn1", "sapl", 1.32, 1.3, "cpu", "llc_jo.md",
     "-s 31 -L 2 -B 1 -P 10 -T 100000 -E 10 -A 100 -k 8 -c 10 -u 10 -f 100"),
    ("ijcnn1", "jo", 1.42, 1.3, "cpu", "llc_jo.md",
     "-s 31 -L 3 -j 0 -B 1 -P 10 -T 100000 -E 10 -A 100 -u 5 -f 100 -c 10"),
    # w8a: 300 sparse binary features, 49749 training rows
    ("w8a", "linear", 1.34, 0.9, "cpu", "llc_jo.md", "liblinear -s 1 -B 1 -c 10"),
    ("w8a", "rbf", 0.86, 45.1, "cpu", "llc_jo.md", "libsvm -t 2 -c 10 -g 0.05"),
    ("w8a", "llsvm", 1.00, 1.0, "cpu", "llc_jo.md",
     "-s 31 -L 2 -f 0 -B 1 -P 10 -T 100000 -E 10 -A 50 -k 8 -u 1 -c 1"),
    ("w8a", "sapl", 0.87, 1.0, "cpu", "llc_jo.md",
     "-s 31 -L 2 -B 1 -P 10 -T 100000 -E 10 -A 50 -c 1 -k 8 -u 1 -f 10000"),
    ("w8a", "jo", 0.83, 2.0, "cpu", "llc_jo.md",
     "-s 31 -L 3 -j 0 -B 1 -P 10 -T 100000 -u 0.2 -E 20 -A 50 -f 10000 -c 1"),
    # usps: 256 pixels, 7291 training images, 10 classes (the shared copy)
    ("usps", "linear", 8.32, 0.3, "cpu", "llsvm.md", "liblinear -s 1 -B 1 -c 0.1"),
    ("usps", "rbf", 5.03, 3.5, "cpu", "llsvm.md", "libsvm -t 2 -c 10 -g 0.02"),
    ("usps", "llsvm", 5.12, 13.1, "cpu", "llsvm.md",
     "-s 1 -L 2 -B 1 -m 2 -a 2 -A 200 -k 45 -u 0.1 -K 1 -c 10"),
    ("usps", "occ", 4.53, 11.4, "cpu", "occ.md", "-L 5 -B 1 -s 3 -A 60 -c 1 (pixels in [-1, 1])"),
    ("usps", "sapl", 5.50, 4.3, "cpu", "llc_jo.md",
     "-s 31 -L 2 -B 1 -P 10 -T 100000 -A 100 -k 8 -c 10 -E 30 -u 0.1 -f 3000"),
    ("usps", "jo", 5.67, 1.6, "cpu", "llc_jo.md",
     "-s 31 -L 3 -j 0 -B 1 -P 10 -T 100000 -E 10 -A 100 -c 10 -f 1000 -u 0.05"),
    ("usps", "kq", 4.78, 38.4, "wall", "kq.md", "-s 40 -E 40 -l 0 -k 1 -Q 20 -U 1.2 -V 0.8 -W 5"),
    ("usps", "kqflats", 4.14, 8.2, "wall", "kq.md", "-s 41 -l 0 -k 32 -Q 10 -y 1"),
    ("usps", "kqflatsvote", 4.43, 0.68, "wall", "defaults.md",
     "-s 41 -k 20 -Q 12 -l 50 -Z 0 -z 0.5 -y 1 -W 5"),
    ("usps", "invariant", 3.94, 34.7, "cpu", "invariant.md",
     "-t 2 -g 0.0078125 -c 10 -s 3 -B 1 -X 1000 -H 4 -J 3 -Y 0.9 (pixels in [-1, 1])"),
    # letter: 16 integer features 0..15, 16000 training rows, 26 classes
    ("letter", "linear", 30.30, 6.8, "cpu", "llsvm.md", "liblinear -s 1 -B 1 -c 1"),
    ("letter", "rbf", 2.17, 68.2, "cpu", "llsvm.md", "libsvm -t 2 -c 10 -g 0.05"),
    ("letter", "llsvm", 3.83, 15.0, "cpu", "llsvm.md",
     "-s 1 -L 2 -a 0 -B 1 -m 2 -A 400 -k 20 -u 0.1 -c 1"),
    ("letter", "occ", 6.08, 4.0, "cpu", "occ.md", "-L 5 -B 1 -s 1 -u 3 -A 16 -c 30 (features in [-1, 1])"),
    ("letter", "sapl", 2.56, 3.6, "cpu", "llc_jo.md",
     "-s 33 -L 2 -B 1 -P 10 -T 100000 -E 50 -A 100 -k 8 -u 0.2 -c 10 -f 30000 (z-scored)"),
    ("letter", "jo", 3.90, 3.3, "cpu", "llc_jo.md",
     "-s 31 -L 3 -j 0 -B 1 -P 10 -T 100000 -E 50 -A 100 -f 3000 -c 3 -u 0.3 (z-scored)"),
    ("letter", "kq", 2.40, 128.4, "wall", "kq.md", "-s 40 -E 40 -l 16 -k 16 -Q 8 -U 1.05 -V 0.95 -W 5"),
    ("letter", "kqflats", 3.45, 2.2, "wall", "kq.md", "-s 41 -l 0 -k 32 -Q 4 -y 1"),
    ("letter", "kqflatsvote", 1.95, 0.70, "wall", "defaults.md",
     "-s 41 -k 32 -Q 4 -l 16 -Z 0 -z 0.5 -y 1 -W 5"),
    # mnist: 784 pixels in [0, 1], 60000 training images, 10 classes
    ("mnist", "linear", 8.20, 20.1, "cpu", "llsvm.md", "liblinear -s 1 -B 1 -c 0.1"),
    ("mnist", "rbf", 1.48, 533.0, "cpu", "llsvm.md", "libsvm -t 2 -c 10 -g 0.02"),
    ("mnist", "llsvm", 1.63, 32.9, "cpu", "llsvm.md",
     "-s 1 -L 2 -a 3 -B 1 -m 2 -A 200 -k 30 -u 0.05 -K 3 -c 2"),
    ("mnist", "occ", 1.42, 64.7, "cpu", "occ.md", "-L 5 -B 1 -s 1 -A 90 -c 1"),
    ("mnist", "sapl", 2.05, 25.4, "cpu", "llc_jo.md",
     "-s 31 -L 2 -B 1 -P 10 -T 100000 -E 10 -A 100 -k 8 -u 0.05 -c 10 -f 3000"),
    ("mnist", "kq", 1.09, 67.8, "wall", "kq.md",
     "-s 40 -l 50 -k 8 -Q 20 -U 1.05 -V 0.95 -E 40 -K 3 -z 0.5 -W 5"),
    ("mnist", "kqflats", 1.56, 43.6, "wall", "kq.md", "-s 41 -l 100 -k 64 -Q 15 -y 1"),
    ("mnist", "kqflatsvote", 1.26, 7.26, "wall", "defaults.md",
     "-s 41 -k 32 -Q 12 -l 50 -Z 0 -z 0.5 -y 1 -W 5"),
]

DATASETS = ["banana", "magic04", "ijcnn1", "w8a", "usps", "letter", "mnist"]
SUBTITLE = {
    "banana": "banana (2-d, 3.5k rows, 2 classes)",
    "magic04": "magic04 (10-d, 12.7k rows, 2 classes)",
    "ijcnn1": "ijcnn1 (22-d, 50k rows, 2 classes)",
    "w8a": "w8a (300-d sparse, 50k rows, 2 classes)",
    "usps": "usps (256 pixels, 7.3k rows, 10 classes)",
    "letter": "letter (16-d, 16k rows, 26 classes)",
    "mnist": "mnist (784 pixels, 60k rows, 10 classes)",
}
# method key -> (legend label, marker, colour, marker size)
STYLE = {
    "linear": ("linear SVM (liblinear)", "s", "#7f7f7f", 55),
    "rbf": ("RBF kernel SVM (libsvm)", "*", "#000000", 120),
    "llsvm": ("LL-SVM (-L 1/2, fixed anchors)", "o", "#1f77b4", 60),
    "occ": ("anchor planes, LIB-LLSVM + C-OCC (-L 5)", "^", "#2ca02c", 65),
    "sapl": ("LLC-SAPL (-s 31/33 -L 2)", "P", "#ff7f0e", 70),
    "jo": ("LLC-JO (-s 31 -L 3)", "D", "#d62728", 50),
    "kq": ("k q-metrics, 5 restarts (-s 40 -W 5)", "v", "#9467bd", 65),
    "kqflats": ("k q-flats (-s 41 -y 1)", "X", "#e377c2", 70),
    "kqflatsvote": ("k q-flats, 5 restarts (solver='flats')", "p", "#17becf", 75),
    "invariant": ("invariant SVM (-H 4 -J 3)", "h", "#8c564b", 75),
}
TIME_FLOOR = 0.05     # a time printed as 0.0 s is drawn here


def main(out: Path = OUT) -> None:
    fig, axes = plt.subplots(2, 4, figsize=(15, 7.6))
    axes = axes.ravel()
    for ax, name in zip(axes, DATASETS):
        rows = [r for r in FIGURES if r[0] == name]
        # off-scale points (the linear SVM on banana, letter, ...) go to the top edge
        others = [r[2] for r in rows if r[1] != "linear"]
        top = max(others) * 1.35
        linear = max(r[2] for r in rows if r[1] == "linear")
        if linear <= 1.5 * top:          # close enough to show on the axis
            top = max(top, linear * 1.12)
        for _, key, err, secs, kind, _, _ in rows:
            label, marker, colour, size = STYLE[key]
            x = max(secs, TIME_FLOOR)
            face = colour if kind == "cpu" else "white"
            if err > top:
                ax.scatter(x, top * 0.95, marker=marker, s=size, c=face, edgecolors=colour,
                           linewidths=1.3, zorder=3)
                ax.annotate(f"{err:.1f} % (off scale)", (x, top * 0.95), textcoords="offset points",
                            xytext=(8, -4), fontsize=8, color=colour)
            else:
                ax.scatter(x, err, marker=marker, s=size, c=face, edgecolors=colour,
                           linewidths=1.3, zorder=3)
        ax.set_xscale("log")
        ax.set_xlim(0.03, 3000)
        ax.set_ylim(0, top)
        ax.grid(True, which="major", alpha=0.35)
        ax.set_title(SUBTITLE[name], fontsize=10)
        ax.set_xlabel("training time, s (log scale)", fontsize=9)
        ax.set_ylabel("test error %", fontsize=9)
        ax.tick_params(labelsize=8)
        if name == "w8a":
            ax.text(0.04, 0.05, "test lines also occur in the training file", fontsize=7,
                    transform=ax.transAxes, color="#555555")
    legend_ax = axes[-1]
    legend_ax.axis("off")
    for key, (label, marker, colour, size) in STYLE.items():
        legend_ax.scatter([], [], marker=marker, s=size, c=colour, edgecolors=colour, label=label)
    legend_ax.scatter([], [], marker="o", s=60, c="white", edgecolors="#444444",
                      label="hollow: wall-clock s (k q-metrics, defaults tables)")
    legend_ax.legend(loc="center", fontsize=8.5, frameon=False, title="filled: process CPU s",
                     title_fontsize=8.5)
    fig.suptitle("Test error vs training time on the shared benchmark sets "
                 "(figures from benchmarks/results/*.md; times under 0.05 s drawn at 0.05 s)",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
