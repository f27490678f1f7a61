"""Atomic writes of model files and prediction output (lcoding.io.atomic): permissions,
symbolic links, temporary files on errors and after a kill -9."""
from __future__ import annotations

import os
import pathlib
import signal
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import LCODING_HOME, child_env

from lcoding.cli import predict_main
from lcoding.io import atomic
from lcoding.io.model_files import save_model_file
from lcoding.liblinearutil import save_model, train



@pytest.fixture(scope="module")
def model():
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.5], [0.2, 1.0]])
    return train([1, 2, 1, 2], X, "-s 1 -q")


def mode_of(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def temp_files(folder):
    return [p.name for p in pathlib.Path(folder).iterdir() if atomic.TEMP_MARK in p.name]


@pytest.fixture
def umask():
    """Set the process umask for one test (restored afterwards)."""
    saved = os.umask(0o022)
    os.umask(saved)
    yield lambda value: os.umask(value)
    os.umask(saved)


@pytest.mark.parametrize("mask,expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_model_file_follows_the_umask(model, tmp_path, umask, mask, expected):
    """Used to be 0600 whatever the umask (mkstemp); LIBLINEAR's fopen gives 0666 & ~umask."""
    umask(mask)
    path = tmp_path / "m.model"
    save_model(str(path), model)
    assert mode_of(path) == expected


def test_overwriting_keeps_the_mode(model, tmp_path, umask):
    umask(0o022)
    path = tmp_path / "m.model"
    path.write_text("old")
    os.chmod(path, 0o640)
    save_model(str(path), model)
    assert mode_of(path) == 0o640
    assert path.read_text().startswith("solver_type")


def test_symlink_target_is_replaced_and_the_link_kept(model, tmp_path):
    target_dir = tmp_path / "real"
    target_dir.mkdir()
    target = target_dir / "m.model"
    target.write_text("old")
    os.chmod(target, 0o604)
    link = tmp_path / "link.model"
    link.symlink_to(target)
    save_model(str(link), model)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().startswith("solver_type")
    assert mode_of(target) == 0o604
    assert temp_files(tmp_path) == [] and temp_files(target_dir) == []


def test_dangling_symlink_creates_its_target(model, tmp_path):
    link = tmp_path / "link.model"
    link.symlink_to(tmp_path / "new.model")
    save_model(str(link), model)
    assert link.is_symlink() and (tmp_path / "new.model").read_text().startswith("solver_type")


@pytest.mark.parametrize("failure", [OSError("disk full"), KeyboardInterrupt()])
@pytest.mark.parametrize("where", ["write", "replace", "fsync"])
def test_temporary_file_removed_on_every_exception(model, tmp_path, monkeypatch, failure, where):
    path = tmp_path / "m.model"
    path.write_text("previous")

    def fail(*args, **kwargs):
        raise failure

    monkeypatch.setattr(atomic.os, where, fail)
    with pytest.raises(type(failure)):
        save_model_file(str(path), model.core)
    monkeypatch.undo()
    assert path.read_text() == "previous"
    assert temp_files(tmp_path) == []


def test_missing_folder_names_the_file(model, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        save_model(str(tmp_path / "no" / "m.model"), model)


def test_temporary_names_carry_the_pid():
    name = atomic.temp_name("m.model", pid=4242)
    assert name.startswith(".m.model.lcoding-tmp.") and ".4242." in name
    assert atomic._TEMP_NAME.search(name)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_temporary_files_of_dead_writers_are_cleaned(model, tmp_path):
    stale = tmp_path / atomic.temp_name("m.model", pid=dead_pid())
    stale.write_text("half a model")
    alive = tmp_path / atomic.temp_name("m.model", pid=os.getppid())
    alive.write_text("being written")
    unrelated = tmp_path / ".m.model.lcoding-tmp.notes"
    unrelated.write_text("not ours")
    save_model(str(tmp_path / "other.model"), model)
    assert not stale.exists()
    assert alive.exists() and unrelated.exists()


KILLED_WRITER = """
import os, sys, time
from lcoding.io import atomic
def stuck(src, dst):          # the write is done, the rename never comes
    print("writing", flush=True)
    time.sleep(600)
atomic.os.replace = stuck
atomic.write_text_atomic(sys.argv[1], "half a model\\n")
"""


def test_kill_9_mid_save_leaves_a_recognisable_file_the_next_save_removes(model, tmp_path):
    env = child_env()
    path = tmp_path / "m.model"
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(KILLED_WRITER), str(path)],
                              cwd=str(LCODING_HOME), env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "writing"
        left = temp_files(tmp_path)
        assert len(left) == 1 and f".{writer.pid}." in left[0]
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    finally:
        if writer.poll() is None:
            writer.kill()
    assert temp_files(tmp_path) == left and not path.exists()
    save_model(str(path), model)
    assert temp_files(tmp_path) == []
    assert path.read_text().startswith("solver_type")


# ------------------------------------------------------------- lcoding-predict
def test_predict_output_is_atomic_and_ignores_a_planted_symlink(model, tmp_path, umask):
    """lcoding-predict wrote to the fixed name <output>.tmp-lcoding and followed a
    symbolic link planted there; it now writes a unique temporary file and renames it."""
    umask(0o022)
    test_file = tmp_path / "t.txt"
    test_file.write_text("1 1:1\n2 2:1\n")
    model_file = tmp_path / "m.model"
    save_model(str(model_file), model)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "out.txt"
    (tmp_path / "out.txt.tmp-lcoding").symlink_to(victim)
    assert predict_main(["-q", str(test_file), str(model_file), str(out)]) == 0
    assert victim.read_text() == "precious\n"
    assert out.read_text().split() == ["1", "2"]
    assert mode_of(out) == 0o644
    assert temp_files(tmp_path) == []


def test_predict_output_through_a_symlink_keeps_the_link(model, tmp_path):
    test_file = tmp_path / "t.txt"
    test_file.write_text("1 1:1\n")
    model_file = tmp_path / "m.model"
    save_model(str(model_file), model)
    real = tmp_path / "real.txt"
    real.write_text("old\n")
    out = tmp_path / "out.txt"
    out.symlink_to(real)
    assert predict_main(["-q", str(test_file), str(model_file), str(out)]) == 0
    assert out.is_symlink() and real.read_text().split() == ["1"]


def test_predict_output_failure_leaves_no_temporary_file(model, tmp_path, monkeypatch, capsys):
    test_file = tmp_path / "t.txt"
    test_file.write_text("1 1:1\n")
    model_file = tmp_path / "m.model"
    save_model(str(model_file), model)

    def fail(*args):
        raise OSError("no space left on device")

    monkeypatch.setattr(atomic.os, "replace", fail)
    assert predict_main(["-q", str(test_file), str(model_file), str(tmp_path / "o.txt")]) == 1
    assert "can't open output file" in capsys.readouterr().err
    assert temp_files(tmp_path) == [] and not (tmp_path / "o.txt").exists()


def test_stale_check_is_cheap(tmp_path, monkeypatch):
    """The check reads only the folder listing: no process lookup and no stat for a
    file that is not one of lcoding's temporary files (500 ordinary files)."""
    for i in range(500):
        (tmp_path / f"f{i}").write_text("")
    looked_up = []
    monkeypatch.setattr(atomic, "_pid_alive", lambda pid: looked_up.append(pid) or False)
    assert atomic.remove_stale_temp_files(str(tmp_path)) == 0
    assert looked_up == []
    assert len(list(tmp_path.iterdir())) == 500
