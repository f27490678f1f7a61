"""Reading speed: lcoding's LIBSVM reader against liblinear-official's.

For each data set (train split), liblinear-official's ``svm_read_problem`` reads
the decompressed file in both modes (list of dicts, ``return_scipy=True``);
lcoding's ``svm_read_problem`` reads the same decompressed file and the shared
``.bz2`` file in both modes.  Each configuration runs ``--repeats`` times,
interleaved so that all readers see the same machine load; the minimum wall
time (and the minimum CPU time of all threads) counts.  One JSON line is
printed per measurement and, unless ``--quick``, a Markdown table is written to
``benchmarks/results/read.md``.

``--quick`` reads only the first 2000 lines of each set, once (the CI smoke run).
"""
import argparse
import bz2
import io
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

try:
    import lcoding  # noqa: F401  (only: is the package importable?)
except ImportError:   # run from a source checkout with in-place extensions
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lcoding.io import datasets
from lcoding.io.reader import svm_read_problem

try:
    from liblinear.commonutil import svm_read_problem as reference_read
except ImportError:   # the comparison needs the reference; lcoding alone still runs
    reference_read = None

QUICK_LINES = 2000
MODES = {"dict": False, "scipy": True}
RESULTS = Path(__file__).resolve().parent / "results" / "read.md"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["ijcnn1", "w8a", "mnist"])
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs per configuration; the minimum counts (default 3)")
    parser.add_argument("--quick", action="store_true",
                        help=f"first {QUICK_LINES} lines of each set, one run, no table")
    parser.add_argument("--output", type=Path, default=None,
                        help="Markdown table (default benchmarks/results/read.md; "
                             "not written with --quick unless given)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    return args


def prepare_inputs(name, workdir, quick):
    """``(plain path, bz2 path)`` of the train split; prefixes of both with quick."""
    source = datasets.dataset_path(name, "train")
    plain = Path(workdir) / f"{name}.train"
    with bz2.open(source, "rb") as src, open(plain, "wb") as dst:
        if quick:
            for _, line in zip(range(QUICK_LINES), src):
                dst.write(line)
        else:
            while block := src.read(1 << 22):
                dst.write(block)
    if not quick:
        return plain, Path(source)
    packed = Path(workdir) / f"{name}.train.bz2"
    packed.write_bytes(bz2.compress(plain.read_bytes(), 9))
    return plain, packed


def timed(read, path, return_scipy):
    """``(wall seconds, CPU seconds of all threads, result)`` of one read."""
    start, cpu_start = time.perf_counter(), time.process_time()
    result = read(str(path), return_scipy=return_scipy)
    return time.perf_counter() - start, time.process_time() - cpu_start, result


def shape_of(result, return_scipy):
    y, x = result
    if return_scipy:
        return len(y), int(x.nnz)
    return len(y), sum(map(len, x))


def warm_up(readers):
    """One tiny read per reader and mode, so no timed run pays first-call costs."""
    sample = "1 1:0.5 3:2\n-1 2:1e-3\n"
    for read in readers:
        for return_scipy in MODES.values():
            read(io.StringIO(sample), return_scipy=return_scipy)


def run(args):
    warm_up([svm_read_problem] + ([reference_read] if reference_read is not None else []))
    measurements = []
    with tempfile.TemporaryDirectory(prefix="lcoding-bench-read-") as workdir:
        for name in args.datasets:
            plain, packed = prepare_inputs(name, workdir, args.quick)
            size = plain.stat().st_size
            readers = [("lcoding", "plain", svm_read_problem, plain),
                       ("lcoding", "bz2", svm_read_problem, packed)]
            if reference_read is not None:
                readers.insert(0, ("liblinear-official", "plain", reference_read, plain))
            for mode, return_scipy in MODES.items():
                times = {key[:2]: [] for key in readers}
                cpu_times = {key[:2]: [] for key in readers}
                shapes = {}
                for _ in range(1 if args.quick else args.repeats):
                    for reader, form, read, path in readers:
                        seconds, cpu_seconds, result = timed(read, path, return_scipy)
                        times[reader, form].append(seconds)
                        cpu_times[reader, form].append(cpu_seconds)
                        shapes[reader, form] = shape_of(result, return_scipy)
                        del result
                for (reader, form), runs in times.items():
                    n_rows, nnz = shapes[reader, form]
                    record = {"benchmark": "read", "dataset": name, "split": "train",
                              "reader": reader, "mode": mode, "input": form,
                              "n_rows": n_rows, "nnz": nnz, "plain_bytes": size,
                              "seconds": min(runs), "runs": [round(t, 6) for t in runs],
                              "cpu_seconds": min(cpu_times[reader, form]),
                              "threads": os.cpu_count(), "quick": args.quick}
                    print(json.dumps(record), flush=True)
                    measurements.append(record)
    return measurements


def markdown_table(measurements):
    by_key = {(m["dataset"], m["mode"], m["reader"], m["input"]): m for m in measurements}
    lines = [
        "# Reading LIBSVM files: lcoding vs liblinear-official",
        "",
        f"Generated by `python benchmarks/bench_read.py` on {time.strftime('%Y-%m-%d %H:%M')} "
        f"(Python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end of the run; the "
        "machine is shared, so absolute times vary from run to run).",
        "",
        "Train splits.  Each time is the minimum over the runs (interleaved between "
        "readers) of the wall time, and in parentheses of the CPU time summed over "
        "threads (less sensitive to other load on the machine).  *plain* is the "
        "decompressed file, *.bz2* the shared file (decompression included).  `dict` "
        "is the default list-of-dict mode, `scipy` is `return_scipy=True`.  Speed-ups "
        "are relative to liblinear-official on the plain file: wall (CPU).",
        "",
        "| data set | rows | nnz | plain MB | mode | liblinear-official, plain (s) "
        "| lcoding, plain (s) | speed-up | lcoding, .bz2 (s) | speed-up |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for dataset in dict.fromkeys(m["dataset"] for m in measurements):
        for mode in MODES:
            ours = by_key.get((dataset, mode, "lcoding", "plain"))
            packed = by_key.get((dataset, mode, "lcoding", "bz2"))
            ref = by_key.get((dataset, mode, "liblinear-official", "plain"))
            if ours is None:
                continue
            lines.append(
                f"| {dataset} | {ours['n_rows']} | {ours['nnz']} | "
                f"{ours['plain_bytes'] / 1e6:.1f} | {mode} | {_seconds(ref)} | "
                f"{_seconds(ours)} | {_ratio(ref, ours)} | {_seconds(packed)} | "
                f"{_ratio(ref, packed)} |")
    return "\n".join(lines) + "\n"


def _seconds(record):
    if record is None:
        return "n/a"
    return f"{record['seconds']:.3f} ({record['cpu_seconds']:.3f})"


def _ratio(reference, ours):
    if reference is None or ours is None:
        return "n/a"
    return (f"{reference['seconds'] / ours['seconds']:.1f}x "
            f"({reference['cpu_seconds'] / ours['cpu_seconds']:.1f}x)")


def main(argv=None):
    args = parse_args(argv)
    if datasets.data_dir() is None:
        print("shared data not found: set LCODING_DATA", file=sys.stderr)
        return 2
    measurements = run(args)
    output = args.output if args.output is not None else (None if args.quick else RESULTS)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(markdown_table(measurements))
        print(f"wrote {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
