"""Import the modules that register solvers into the tables of
``lcoding.solvers`` / ``lcoding.training`` (one line per module)."""
from lcoding import solvers_newton  # noqa: E402,F401  (-s 0, 2, 7, 11)
from lcoding import solvers_dual_more  # noqa: E402,F401  (-s 4, 12, 13, 21)
from lcoding import solvers_l1  # noqa: E402,F401  (-s 5, 6)

from lcoding.options import SolverType, TRAINABLE_SOLVERS  # noqa: E402



def check_registry(trainable=TRAINABLE_SOLVERS) -> None:
    """Every solver number of the option table trains: a module missing from the
    imports above fails here, at import, instead of at the first train() call."""
    missing = sorted(int(st) for st in SolverType if int(st) not in trainable)
    if missing:
        names = ", ".join(f"-s {st} ({SolverType(st).name})" for st in missing)
        raise ImportError(f"lcoding: no trainer registered for {names}; "
                          f"lcoding/_registry.py must import the module that provides it")


check_registry()
