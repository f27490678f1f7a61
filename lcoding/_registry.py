"""Import the modules that register solvers into the tables of
``lcoding.solvers`` / ``lcoding.training`` (one line per module)."""
from lcoding import solvers_newton  # noqa: E402,F401  (-s 0, 2, 7, 11)
from lcoding import solvers_dual_more  # noqa: E402,F401  (-s 4, 12, 13, 21)
from lcoding import solvers_l1  # noqa: E402,F401  (-s 5, 6)

from lcoding.options import SolverType, TRAINABLE_SOLVERS  # noqa: E402

# every solver number of the option table trains; a module missing from the list
# above fails here, at import, instead of at the first train() call
_missing = {int(st) for st in SolverType} - TRAINABLE_SOLVERS
if _missing:
    raise ImportError(f"lcoding: no trainer registered for -s {sorted(_missing)}; "
                      f"lcoding/_registry.py must import the module that provides it")
