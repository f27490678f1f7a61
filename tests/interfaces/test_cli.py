"""lcoding-train / lcoding-predict against LIBLINEAR's train / predict programs:
arguments, output files, exit codes, messages."""
from __future__ import annotations

import numpy as np
import pytest

from lcoding.cli import predict_main, train_main
from lcoding.liblinearutil import load_model, predict, svm_read_problem, train

TRAIN = """1 1:0.5 3:1
-1 2:1.5
1 1:1 2:0.2 3:0.7
-1 2:2 3:-0.5
1 1:0.9 3:0.1
-1 1:-0.3 2:1
"""


@pytest.fixture
def files(tmp_path):
    train_file = tmp_path / "toy.train"
    train_file.write_text(TRAIN)
    return tmp_path, str(train_file)


def test_train_writes_default_model_name_and_predict_writes_labels(files, monkeypatch, capsys):
    folder, train_file = files
    monkeypatch.chdir(folder)
    assert train_main(["-s", "3", "-B", "1", "-q", train_file]) == 0
    model = load_model(str(folder / "toy.train.model"))    # LIBLINEAR: basename + ".model"
    out = str(folder / "out.txt")
    assert predict_main([train_file, "toy.train.model", out]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("Accuracy = ") and "(6/6)" in printed or "%" in printed
    y, x = svm_read_problem(train_file)
    expected = predict(y, x, model, "-q")[0]
    assert [float(v) for v in open(out).read().split()] == expected


def test_model_name_argument_and_same_model_as_api(files):
    folder, train_file = files
    path = str(folder / "named.model")
    assert train_main(["-c", "4", "-q", train_file, path]) == 0
    y, x = svm_read_problem(train_file)
    np.testing.assert_array_equal(load_model(path).get_weights(), train(y, x, "-c 4 -q").get_weights())


def test_cross_validation_prints_accuracy(files, capsys):
    _, train_file = files
    assert train_main(["-v", "3", "-q", train_file]) == 0
    assert "Cross Validation Accuracy = " in capsys.readouterr().out


@pytest.mark.parametrize("argv,code,where,text", [
    ([], 1, "out", "Usage: lcoding-train"),
    (["-h"], 0, "out", "options common to every method:"),
    (["--help"], 0, "out", "options for the local codings"),
    (["-c", "1", "--help", "FILE"], 0, "out", "Usage: lcoding-train"),
    (["-Z", "3", "FILE"], 1, "err", "option -Z 3: must be one of 0, 1"),
    (["-x", "5", "FILE"], 1, "err", "option -x 5: must be one of 0, 1"),
    (["-L", "9", "FILE"], 1, "err", "option -L 9: must be one of 0, 1, 2, 3, 4, 5, 6, auto"),
    (["--help"], 0, "out", "-b seconds : time budget in seconds of -C -L auto"),
    (["-L", "auto", "FILE"], 1, "err", "ERROR: -L auto selects a method by cross-validation: "
                                       "it needs -C (options -L, -C)"),
    (["-b", "5", "FILE"], 1, "err", "only applies to -C -L auto (option -b)"),
    (["-C", "-L", "auto", "-b", "0", "FILE"], 1, "err", "option -b 0: must be > 0"),
    (["-y", "1", "-Q"], 1, "err", "option -Q needs a value"),
    (["-c", "0", "FILE"], 1, "err", "ERROR: C <= 0"),
    (["FILE_MISSING"], 1, "err", "can't open input file"),
])
def test_train_errors_and_exit_codes(files, capsys, argv, code, where, text):
    _, train_file = files
    argv = [train_file if a == "FILE" else a for a in argv]
    assert train_main(argv) == code
    cap = capsys.readouterr()
    assert text in (cap.out if where == "out" else cap.err)


def test_C_L_auto_prints_the_search_and_writes_no_model(files, monkeypatch, capsys):
    """LIBLINEAR's -C: the lines of the search and the best one, no model file."""
    from lcoding import select
    folder, train_file = files
    monkeypatch.chdir(folder)
    # two linear candidates: 6 rows hold no anchors, and the run stays short
    monkeypatch.setattr(select, "candidate_options",
                        lambda y, rows, seed=1: ["-s 2 -B 1 -c 1", "-s 2 -B 1 -c 10"])
    assert train_main(["-C", "-L", "auto", "-b", "60", "-m", "2", train_file]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Doing parameter search with 3-fold cross validation.\n")
    assert "rung 0 rows 6: -s 2 -B 1 -c 1: CV error " in out
    assert out.splitlines()[-1].startswith("Best C = ")
    assert "Best options: -s 2 -B 1 -c " in out
    assert sorted(p.name for p in folder.iterdir()) == ["toy.train"]


def test_train_bad_file_names_the_line(tmp_path, capsys):
    bad = tmp_path / "bad.train"
    bad.write_text("1 1:0.5\n-1 2:abc\n")
    assert train_main([str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bad.train" in err and ":2:" in err


def test_predict_errors(files, capsys):
    folder, train_file = files
    model = str(folder / "m.model")
    assert train_main(["-q", train_file, model]) == 0
    assert predict_main([train_file, model]) == 1
    assert "Usage: lcoding-predict" in capsys.readouterr().out
    assert predict_main(["-b", "1", train_file, model, str(folder / "o")]) == 1
    assert "only supported for logistic regression" in capsys.readouterr().err
    assert predict_main([train_file, str(folder / "missing.model"), str(folder / "o")]) == 1
    assert "can't open model file" in capsys.readouterr().err
    assert predict_main([str(folder / "missing"), model, str(folder / "o")]) == 1
    assert "can't open input file" in capsys.readouterr().err


@pytest.mark.slow
def test_console_scripts_installed():
    import shutil
    import subprocess
    exe = shutil.which("lcoding-train")
    if exe is None:
        pytest.skip("package not installed with its console scripts (in-place build)")
    proc = subprocess.run([exe], capture_output=True, text=True)
    assert proc.returncode == 1 and "Usage: lcoding-train" in proc.stdout


@pytest.mark.parametrize("argv", [["-h"], ["--help"]])
def test_predict_help_exits_0(capsys, argv):
    assert predict_main(argv) == 0
    assert capsys.readouterr().out.startswith("Usage: lcoding-predict")


def test_missing_model_file_is_named_once(tmp_path, capsys):
    data = tmp_path / "t.txt"
    data.write_text("1 1:0.5\n")
    assert predict_main([str(data), str(tmp_path / "none.model"), str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("none.model") == 1 and "no such file" in err


@pytest.mark.parametrize("threads", ["1", "2"])
def test_non_quiet_local_training_prints_its_events_on_lines_of_their_own(tmp_path, capsys,
                                                                           threads):
    """Without -q an lcoding method prints its events -- each k-means step, each
    class's solve -- on lines of their own, also with -m 2 (LIBLINEAR's progress dots
    of the two threads may share a line; an event never does)."""
    import re
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = np.argmax(X, axis=1)
    train_file = tmp_path / "three.train"
    train_file.write_text("".join(f"{c} " + " ".join(f"{j + 1}:{v:.6f}" for j, v in enumerate(x))
                                  + "\n" for c, x in zip(y, X)))
    assert train_main(["-s", "1", "-L", "2", "-A", "12", "-k", "3", "-u", "1", "-a", "0",
                       "-m", threads, str(train_file), str(tmp_path / "m")]) == 0
    lines = capsys.readouterr().out.splitlines()
    steps = [line for line in lines if re.fullmatch(
        r"k-means iteration \d+: inertia [\d.e+-]+, centre shift [\d.e+-]+", line)]
    solves = [line for line in lines if re.fullmatch(
        r"class \d+ vs rest: \d+ passes, [\d.]+ s", line)]
    assert steps and len(solves) == 3
    assert not any(("class " in line or "k-means" in line) and line not in steps + solves
                   for line in lines)


def test_liblinear_solvers_print_no_events(files, capsys):
    """The plain LIBLINEAR solvers' text stays LIBLINEAR's: no event lines."""
    folder, train_file = files
    assert train_main(["-s", "1", train_file, str(folder / "m")]) == 0
    out = capsys.readouterr().out
    assert "passes," not in out and "k-means" not in out
