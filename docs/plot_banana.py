"""Decision boundary of the LL-SVM on banana (like Fig. 1 of Ladicky & Torr 2011).

Trains a linear SVM and the LL-SVM (SGD, the paper's 8-NN inverse-distance coding
on k-means anchors) on the banana training set, and draws the test points, the
anchors and both decision boundaries.  Writes ``docs/llsvm_banana.png``::

    python docs/plot_banana.py
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from lcoding.io import datasets  # noqa: E402
from lcoding.core.rows import as_rows  # noqa: E402
from lcoding.core.options import parse_train_options  # noqa: E402
from lcoding.training import train_model  # noqa: E402

OUT = Path(__file__).resolve().parent / "llsvm_banana.png"
LLSVM = "-s 30 -L 1 -A 100 -k 8 -B 1 -c 1 -q"
LINEAR = "-s 1 -B 1 -q"


def main():
    y, X = datasets.load("banana", "train")
    ty, tX = datasets.load("banana", "test")
    llsvm = train_model(y, X, parse_train_options(LLSVM))
    linear = train_model(y, X, parse_train_options(LINEAR))
    Xt = tX.to_csr().toarray()
    lo, hi = Xt.min(0) - 0.3, Xt.max(0) + 0.3
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], 400), np.linspace(lo[1], hi[1], 400))
    grid = as_rows(np.column_stack([gx.ravel(), gy.ravel()]))

    def surface(model):
        return model.decision_values(grid)[:, 0].reshape(gx.shape)

    def acc(model):
        return 100 * np.mean(model.labels_from_values(model.decision_values(tX)) == ty)

    fig, ax = plt.subplots(figsize=(7, 6))
    f = surface(llsvm)
    ax.contourf(gx, gy, f, levels=[-1e9, 0, 1e9], colors=["#f6d5d5", "#d5e3f6"], alpha=0.8)
    pos = ty == llsvm.label[0]
    ax.scatter(Xt[pos, 0], Xt[pos, 1], s=5, c="#1f4e9c", label=f"class {llsvm.label[0]}")
    ax.scatter(Xt[~pos, 0], Xt[~pos, 1], s=5, c="#b22222", label=f"class {llsvm.label[1]}")
    ax.contour(gx, gy, f, levels=[0], colors="k", linewidths=1.8)
    ax.contour(gx, gy, surface(linear), levels=[0], colors="gray", linewidths=1.2,
               linestyles="--")
    A = llsvm.coding.anchors
    ax.scatter(A[:, 0], A[:, 1], marker="x", c="k", s=25, linewidths=1, label="anchors (k-means)")
    ax.plot([], [], "k-", label=f"LL-SVM boundary (test acc {acc(llsvm):.1f} %)")
    ax.plot([], [], "--", c="gray", label=f"linear SVM boundary (test acc {acc(linear):.1f} %)")
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    ax.set_title(f"LL-SVM on banana: {LLSVM.replace(' -q', '')}")
    ax.legend(loc="lower left", fontsize=8, framealpha=0.9)
    fig.tight_layout()
    fig.savefig(OUT, dpi=110)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
