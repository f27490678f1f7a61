"""lcoding.dask: training on dask collections by CoCoA+ on a LocalCluster (2 worker
processes), lazy prediction, the dask LIBSVM reader; bad inputs raise before
anything is scheduled; a worker killed mid-fit gives a model or a clear error."""
from __future__ import annotations

import operator
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

# real LocalClusters and CoCoA+ rounds (~10 s): the full suite (CI) runs them
pytestmark = pytest.mark.slow

import lcoding                                                    # noqa: E402
import lcoding.dask as ldask                                      # noqa: E402
from lcoding.core.messages import Messages                        # noqa: E402
from lcoding.core.model import LinearModel                        # noqa: E402
from lcoding.core.options import parse_train_options              # noqa: E402
from lcoding.core.rows import rows_from_sparse                    # noqa: E402
from lcoding.io.model_files import save_model_file                # noqa: E402
from lcoding.io.reader import LibsvmFormatError, read_libsvm      # noqa: E402
from lcoding.local.model import LocalModel                        # noqa: E402
from lcoding.methods.occ import OCCModel                          # noqa: E402
from lcoding.training import load_model_file, train_model         # noqa: E402


# every wait for the workers is bounded (lcoding.dask.train's timeout), and every test
# of this file by an alarm: a stuck cluster fails the test instead of hanging the run
WAIT = 60.0
TEST_LIMIT = 180


class _TestTimeout(Exception):
    pass


@pytest.fixture(autouse=True)
def _alarm():
    def ring(signum, frame):
        raise _TestTimeout(f"test_dask: a test ran longer than {TEST_LIMIT} s")
    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(TEST_LIMIT)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


class _NoClient:
    """A client that fails the test if anything is scheduled on it."""

    def __getattr__(self, name):
        raise AssertionError(f"client.{name} used: work was scheduled before the input check")


def _dask(X, y, n_chunks=2):
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    step = -(-X.shape[0] // n_chunks)
    Xd = da.from_array(X, chunks=(step, X.shape[1]))
    return Xd, da.from_array(np.asarray(y, dtype=np.float64), chunks=(step,))


def primal_objective(model, y, rows, C, loss):
    f = model.decision_values(rows)[:, 0]
    ypm = np.where(np.trunc(y) == model.label[0], 1.0, -1.0)
    m = np.maximum(0.0, 1.0 - ypm * f)
    return 0.5 * float(np.sum(model.w ** 2)) + C * float(np.sum(m ** 2 if loss == "l2" else m))


def _accuracy(model, ty, trows):
    return 100.0 * np.mean(model.labels_from_values(
        model.decision_values(trows.truncated(model.nr_feature))) == ty)


def _compare(client, data, options, model_class, n_chunks=2, **kw):
    """Dask fit vs the single-process fit: primal within 1e-3, accuracy within 0.2.
    The rows are shuffled first: CoCoA+ converges fastest when every chunk is a
    random sample of the rows (docs/scale.md)."""
    y, X, ty, tX = data
    perm = np.random.default_rng(0).permutation(X.shape[0])
    y, X = y[perm], X[perm]
    rows, trows = rows_from_sparse(X), rows_from_sparse(tX)
    single = train_model(y, rows, parse_train_options(options + " -q"), Messages(True))
    Xd, yd = _dask(X, y, n_chunks)
    model = ldask.train(yd, Xd, options + " -q", client=client, timeout=WAIT, **kw)
    assert type(model) is model_class and type(single) is model_class
    assert np.array_equal(model.label, single.label)
    loss = "l2" if " -s 1" in " " + options else "l1"
    C = parse_train_options(options).C
    p1 = primal_objective(single, y, rows, C, loss)
    p2 = primal_objective(model, y, rows, C, loss)
    assert abs(p2 - p1) <= 1e-3 * abs(p1), (p1, p2)
    assert abs(_accuracy(model, ty, trows) - _accuracy(single, ty, trows)) <= 0.2
    return model


# ---------------------------------------------------------------- no cluster
def test_importing_lcoding_does_not_import_dask():
    code = ("import lcoding, lcoding.liblinearutil, lcoding.training, lcoding.cli, sys; "
            "assert 'dask' not in sys.modules and 'distributed' not in sys.modules")
    # start where the imported lcoding lives (site-packages after pip install, the
    # repository after an in-place build), not in an unbuilt source tree
    home = str(Path(lcoding.__file__).resolve().parents[1])
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=home)
    assert res.returncode == 0, res.stderr


def test_is_dask_collection():
    assert ldask.is_dask_collection(da.zeros((3, 2), chunks=2))
    assert not ldask.is_dask_collection(np.zeros((3, 2)))


def test_bad_inputs_raise_before_anything_is_scheduled():
    rng = np.random.default_rng(0)
    X = da.from_array(rng.random((100, 4)), chunks=(30, 4))
    y = da.from_array(np.where(rng.random(100) > 0.5, 1.0, -1.0), chunks=(30,))
    nc = _NoClient()
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        ldask.train(y, X[X[:, 0] > 0.5], "-s 1", client=nc)
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        ldask.train(y[y > 0], X, "-s 1", client=nc)
    with pytest.raises(ValueError, match="partitioned differently"):
        ldask.train(y.rechunk(25), X, "-s 1", client=nc)
    with pytest.raises(ValueError, match="differs from the 100 rows"):
        ldask.train(np.ones(99), X, "-s 1", client=nc)
    bad = np.ones(100)
    bad[17] = np.nan
    with pytest.raises(ValueError, match="label 17 is nan"):
        ldask.train(bad, X, "-s 1", client=nc)
    with pytest.raises(TypeError, match="dask"):
        ldask.train(y, np.zeros((100, 4)), "-s 1", client=nc)
    with pytest.raises(TypeError, match="not numeric"):
        ldask.train(y, X.astype(str), "-s 1", client=nc)
    for options in ("-s 2", "-s 30 -L 1", "-s 4 -L 2", "-L 5 -u 0", "-s 40", "-v 3",
                    "-s 31 -L 3"):
        with pytest.raises(ValueError):
            ldask.train(y, X, options, client=nc)
    with pytest.raises(ValueError, match="-k 200"):      # the method's own checks run too
        ldask.train(y, X, "-L 2 -A 10 -k 200", client=nc)
    with pytest.raises(ValueError, match="strategy='threads' must be one of"):
        ldask.train(y, X, "-s 1", client=nc, strategy="threads")


def test_auto_strategy_solves_classes_on_workers_when_the_rows_fit():
    """"auto": several problems whose rows (and codes) fit three times into the
    smallest worker memory limit -> "classes"; one problem, or rows too big -> CoCoA+."""
    class Limits:
        def __init__(self, *limits):
            self.limits = limits

        def scheduler_info(self):
            return {"workers": {f"w{i}": {"memory_limit": m} for i, m in enumerate(self.limits)}}

    GB = 2 ** 30
    choose = ldask._choose_strategy
    assert choose("auto", 10, Limits(12 * GB, 12 * GB), 2 * GB) == "classes"
    assert choose("auto", 10, Limits(12 * GB, 5 * GB), 2 * GB) == "cocoa"    # 6 GB > 5 GB
    assert choose("auto", 1, Limits(12 * GB), 1) == "cocoa"                  # binary
    assert choose("auto", 10, Limits(0, 0), 100 * GB) == "classes"           # no limits set
    assert choose("cocoa", 10, Limits(12 * GB), 1) == "cocoa"
    assert choose("classes", 1, Limits(1), 10 * GB) == "classes"


def test_a_problem_that_keeps_killing_its_workers_is_a_clear_error(monkeypatch):
    """Strategy "classes": a solve whose workers die again and again (Dask's
    KilledWorker, most often memory: every worker holds all rows) ends the fit with a
    RuntimeError that names the problem, the memory and the way out."""
    from distributed.scheduler import KilledWorker

    class Dead:
        def result(self):
            import types
            raise KilledWorker("_solve_problem-1",
                               types.SimpleNamespace(address="tcp://127.0.0.1:1"), 3)

    class Client:
        def nthreads(self):
            return {"tcp://127.0.0.1:1": 1}

        def submit(self, *args, **kwargs):
            return Dead()

    monkeypatch.setattr(distributed, "wait", lambda fs, **kw: (set(fs), set()))
    with pytest.raises(RuntimeError, match=r"one-vs-rest problem 0 died again and again .*"
                                           r"3072 MB .*strategy='cocoa'"):
        ldask._class_solves(Client(), [object()], [0, 1], {0: None, 1: None}, None, 1.0,
                            Messages(True), lambda n: None, nbytes=3 * 2 ** 30)


def test_no_client_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(distributed, "default_client",
                        lambda: (_ for _ in ()).throw(ValueError("No clients found")))
    X = da.ones((10, 2), chunks=5)
    with pytest.raises(ValueError, match="needs a distributed Client"):
        ldask.train(np.ones(10), X, "-s 1")


# --------------------------------------------------------------- on a cluster
@pytest.mark.slow
def test_linear_s1_matches_one_process(client, shared_data, tmp_path):
    y, X, ty, tX = shared_data("ijcnn1")
    data = (y[:10000], X[:10000], ty[:20000], tX[:20000])
    model = _compare(client, data, "-s 1 -c 1 -B 1", LinearModel)
    # an ordinary model: files in the same format, predictions through the usual API
    path = tmp_path / "ijcnn1.model"
    save_model_file(path, model)
    back = load_model_file(path)
    assert np.array_equal(back.w, model.w) and np.array_equal(back.label, model.label)
    tXd = da.from_array(tX[:20000].toarray(), chunks=(7000, tX.shape[1]))
    lazy = ldask.predict(model, tXd)
    assert isinstance(lazy, da.Array) and lazy.shape == (20000,)
    trows = rows_from_sparse(tX[:20000])
    expected = model.labels_from_values(model.decision_values(trows))
    assert np.array_equal(lazy.compute(), expected)
    values = ldask.decision_function(model, tXd).compute()
    assert np.allclose(values, model.decision_values(trows))


def test_llsvm_L2_matches_one_process(client, shared_data):
    _compare(client, shared_data("banana"), "-s 1 -L 2 -A 20 -k 4 -u 1 -c 1 -B 1",
             LocalModel, local_passes=3)


def test_a_left_out_width_comes_from_the_sampled_rows(client, shared_data):
    """-L 2 without -u: the Gaussian width from the rows the driver samples (mapped
    by -K already, not twice), as one-process training takes it from all rows:
    beta='scale', near the one-process value, not -u's default 1."""
    from lcoding.liblinearutil import train
    y, X, ty, tX = shared_data("banana")
    y, X = y[:2000], X[:2000]
    Xd, yd = _dask(X, y, 2)
    for options in ("-s 1 -L 2 -A 20 -k 4 -c 1 -B 1", "-s 1 -L 2 -A 20 -k 4 -K 3 -c 1 -B 1"):
        local = train(y, X, options + " -q")._core.coding.param
        model = ldask.train(yd, Xd, options + " -q", client=client, timeout=WAIT)
        assert model.coding.param != 1.0 and 0.5 < model.coding.param / local < 2.0


def test_occ_L5_matches_one_process(client, shared_data):
    y, X, ty, tX = shared_data("ijcnn1")
    data = (y[:5000], X[:5000], ty[:10000], tX[:10000])
    _compare(client, data, "-s 1 -L 5 -A 8 -c 1 -B 1", OCCModel, local_passes=2)


def test_sparse_chunks_give_the_same_model(client, shared_data):
    y, X, _, _ = shared_data("banana")
    Xd, yd = _dask(X, y, 2)
    options = "-s 3 -c 1 -B 1 -q"
    dense = ldask.train(yd, Xd, options, client=client, timeout=WAIT, local_passes=5)
    sparse = ldask.train(yd, Xd.map_blocks(sp.csr_matrix, meta=sp.csr_matrix((0, 0))), options,
                         client=client, timeout=WAIT, local_passes=5)
    assert np.array_equal(dense.w, sparse.w)


def test_dataframes(client, shared_data):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    y, X, _, _ = shared_data("banana")
    options = "-s 3 -c 1 -B 1 -q"
    Xd, yd = _dask(X, y, 2)
    arrays = ldask.train(yd, Xd, options, client=client, timeout=WAIT, local_passes=5)
    frame = dd.from_pandas(pd.DataFrame(X.toarray(), columns=["a", "b"]), npartitions=2)
    labels = dd.from_pandas(pd.Series(y), npartitions=2)
    framed = ldask.train(labels, frame, options, client=client, timeout=WAIT, local_passes=5)
    assert framed.nr_feature == 2 and framed.label.tolist() == arrays.label.tolist()


@pytest.mark.parametrize("options", ["-s 1 -L 2 -a 3 -A 20 -k 4 -u 0.05 -c 1 -B 1",
                                     "-s 3 -L 6 -A 12 -k 3 -u 0.1 -c 1",
                                     "-s 1 -c 1 -B 1"])
def test_classes_strategy_gives_the_single_process_model(client, shared_data, options):
    """Strategy "classes" (the default for several problems): every worker solves
    whole one-vs-rest problems on all rows.  With the anchors from all rows
    (sample_size >= n) and the chunks in row order, the model is the one-process
    model bit for bit -- the same objective, in the time of -m threads."""
    y, X, ty, tX = shared_data("usps")
    y, X = y[:1500], X[:1500]
    single = train_model(y, rows_from_sparse(X), parse_train_options(options + " -q"),
                         Messages(True))
    Xd, yd = _dask(X, y, 3)
    solved = []
    model = ldask.train(yd, Xd, options + " -q -m 2", client=client, timeout=WAIT,
                        sample_size=X.shape[0], progress=lambda i, left: solved.append(left))
    assert type(model) is type(single)
    assert np.array_equal(model.label, single.label)
    assert np.array_equal(model.w, single.w)
    if isinstance(model, LocalModel):
        assert np.array_equal(model.coding.anchors, single.coding.anchors)
    assert solved == list(range(9, -1, -1))      # one call per solved problem


def test_classes_strategy_hands_a_stalled_solve_over_to_newton(client, capfd):
    """Rows with a large common component stall LL-SVM's dual CD; a worker's solve
    hands over to Newton as the one-process training does: the same model bit for
    bit."""
    rng = np.random.default_rng(5)
    X = 30.0 + rng.normal(size=(1500, 6))
    y = np.where(X[:, 0] - 30 + 0.5 * (X[:, 1] - 30) + 0.7 * rng.normal(size=1500) > 0, 1.0, -1.0)
    X = sp.csr_matrix(X)
    options = "-s 1 -c 10 -B 1 -L 2 -A 1 -k 1"
    single = train_model(y, rows_from_sparse(X), parse_train_options(options))
    assert "did not halve" in capfd.readouterr().out
    Xd, yd = _dask(X, y, 3)
    model = ldask.train(yd, Xd, options + " -q", client=client, timeout=WAIT,
                        sample_size=X.shape[0], strategy="classes")
    assert np.array_equal(model.w, single.w)


@pytest.mark.parametrize("options", ["-s 1 -L 4 -A 4 -u 3 -c 1 -B 1", "-s 3 -L 5 -A 4 -c 1 -B 1"])
def test_classes_strategy_trains_anchor_planes(client, shared_data, options):
    """Anchor planes (G-OCC with a bias per plane, C-OCC one class at a time) under
    "classes": the one-process model up to rounding (the planes are learned from the
    sampled rows by the driver's own path, which rounds differently)."""
    y, X, ty, tX = shared_data("usps")
    y, X = y[:1500], X[:1500]
    single = train_model(y, rows_from_sparse(X), parse_train_options(options + " -q"),
                         Messages(True))
    Xd, yd = _dask(X, y, 3)
    model = ldask.train(yd, Xd, options + " -q", client=client, timeout=WAIT,
                        sample_size=X.shape[0], strategy="classes")
    assert type(model) is type(single) and np.array_equal(model.label, single.label)
    assert np.allclose(model.w, single.w, rtol=1e-9, atol=1e-11)


def test_classes_strategy_survives_a_killed_worker(client, shared_data):
    """A worker killed after the first problem is solved: its tasks are pure, Dask
    recomputes them elsewhere, and the model is still the one-process model."""
    y, X, ty, tX = shared_data("usps")
    y, X = y[:1500], X[:1500]
    options = "-s 1 -L 2 -A 20 -k 4 -u 0.05 -c 1 -B 1 -q"
    single = train_model(y, rows_from_sparse(X), parse_train_options(options), Messages(True))
    Xd, yd = _dask(X, y, 2)
    killed = []

    def progress(step, left):
        if step == 1 and not killed:
            pids = client.run(os.getpid)
            os.kill(pids[sorted(pids)[0]], signal.SIGKILL)
            killed.append(step)

    try:
        model = ldask.train(yd, Xd, options, client=client, timeout=WAIT,
                            sample_size=X.shape[0], progress=progress, strategy="classes")
    except (RuntimeError, OSError) as err:       # a clear error is the other outcome
        assert "lcoding.dask" in str(err) or "worker" in str(err).lower()
        return
    assert killed
    assert np.array_equal(model.w, single.w)


@pytest.mark.parametrize("strategy", ["cocoa", "classes"])
def test_labels_found_in_some_chunks_only(client, strategy):
    rng = np.random.default_rng(3)
    X = rng.random((600, 3))
    y = np.where(X[:, 0] > 0.5, 4.0, 2.0)
    y[500:] = 9.0                  # class 9 only in the last chunk
    X[500:, 1] += 2.0
    single = train_model(y, rows_from_sparse(sp.csr_matrix(X)),
                         parse_train_options("-s 1 -c 1 -B 1 -q"), Messages(True))
    Xd = da.from_array(X, chunks=(200, 3))
    model = ldask.train(da.from_array(y, chunks=200), Xd, "-s 1 -c 1 -B 1 -q", client=client,
                        timeout=WAIT, local_passes=10, strategy=strategy)
    assert model.label.tolist() == single.label.tolist() == [2, 4, 9]
    assert model.w.shape == single.w.shape
    agree = np.mean(ldask.predict(model, Xd).compute() == y)
    assert agree > 0.9


def test_a_wait_past_the_timeout_is_a_clear_error(client, shared_data):
    """A round that takes longer than ``timeout`` ends the fit with a RuntimeError
    naming the wait (no model), and the cluster stays usable."""
    y, X, _, _ = shared_data("banana")
    Xd, yd = _dask(X, y, 2)
    with pytest.raises(RuntimeError, match="took longer than timeout=1e-06 s"):
        ldask.train(yd, Xd, "-s 1 -L 2 -A 20 -k 4 -u 1 -c 1 -B 1 -q", client=client,
                    timeout=1e-6)
    with pytest.raises(ValueError, match="timeout"):
        ldask.train(yd, Xd, "-s 1 -q", client=client, timeout=0)
    assert client.submit(operator.add, 1, 2).result(timeout=WAIT) == 3


def test_a_class_solve_past_the_timeout_is_a_clear_error(client, shared_data, monkeypatch):
    """Strategy "classes": a wait for the solved problems past ``timeout`` raises the
    same RuntimeError naming the wait (the wait itself is made to time out here: a
    real solve this slow would make the suite slow), and the cluster stays usable."""
    real_wait = distributed.wait

    def wait(futures, timeout=None, return_when="ALL_COMPLETED"):
        if return_when == "FIRST_COMPLETED":
            raise TimeoutError
        return real_wait(futures, timeout=timeout, return_when=return_when)

    monkeypatch.setattr(distributed, "wait", wait)
    y, X, _, _ = shared_data("usps")
    Xd, yd = _dask(X[:600], y[:600], 2)
    with pytest.raises(RuntimeError, match="a one-vs-rest problem took longer than "
                                           "timeout=30 s"):
        ldask.train(yd, Xd, "-s 1 -c 1 -B 1 -q", client=client, timeout=30,
                    strategy="classes")
    monkeypatch.undo()
    assert client.submit(operator.add, 1, 2).result(timeout=WAIT) == 3


def test_nan_label_in_a_dask_y(client):
    X = da.ones((20, 2), chunks=10)
    y = np.ones(20)
    y[13] = np.nan
    with pytest.raises(ValueError, match="finite"):
        ldask.train(da.from_array(y, chunks=10), X, "-s 1 -q", client=client, timeout=WAIT)


def test_read_libsvm_into_dask_chunks(client, tmp_path):
    lines = [f"{1 if i % 3 else -1} 1:{(i % 97) / 97} {2 + i % 5}:{-(i % 13) / 13}\n"
             for i in range(3000)]
    path = tmp_path / "data.txt"
    path.write_text("".join(lines))
    y, X = ldask.read_libsvm(path, blocksize=8192)
    assert X.numblocks[0] > 3 and not np.isnan(X.chunks[0]).any()
    y0, rows = read_libsvm(path)
    assert np.array_equal(y.compute(), y0)
    Xc = X.compute()
    assert sp.issparse(Xc) and Xc.shape == (3000, rows.n_features)
    assert (Xc != rows.to_csr()).nnz == 0
    y7, X7 = ldask.read_libsvm(path, blocksize=8192, n_features=7)
    assert X7.shape == (3000, 7)
    model = ldask.train(y.rechunk(1500), X.rechunk((1500, X.shape[1])), "-s 1 -c 1 -q",
                        client=client, timeout=WAIT, local_passes=10)
    assert model.nr_feature == rows.n_features
    lines[2345] = "1 3:0.5 2:oops\n"
    path.write_text("".join(lines))
    with pytest.raises(LibsvmFormatError, match=r"data\.txt:2346: "):
        ldask.read_libsvm(path, blocksize=8192)


def test_worker_killed_mid_fit_gives_a_model_or_a_clear_error(client, shared_data, tmp_path):
    """Kill one worker process after round 3: the fit ends with a usable model (Dask
    recomputes the chunk's rows and codes, its duals restart) or a clear error --
    never a partial model file."""
    y, X, ty, tX = shared_data("banana")
    Xd, yd = _dask(X, y, 2)
    killed = []

    def progress(round_, active):
        if round_ == 3 and not killed:
            pids = client.run(os.getpid)
            pid = pids[sorted(pids)[0]]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            time.sleep(0.5)        # the nanny notices; a later loss is covered by timeouts

    path = tmp_path / "killed.model"
    try:
        model = ldask.train(yd, Xd, "-s 1 -L 2 -A 20 -k 4 -u 1 -c 1 -B 1 -q", client=client,
                            timeout=WAIT,
                            progress=progress, local_passes=2)
    except (RuntimeError, OSError) as err:        # a clear error, and no model file
        assert "lcoding.dask" in str(err) or "worker" in str(err).lower()
        assert not path.exists()
        return
    assert killed
    save_model_file(path, model)
    back = load_model_file(path)
    assert _accuracy(back, ty, rows_from_sparse(tX)) > 85.0
