"""Import the modules that register solvers into the tables of
``lcoding.solvers`` / ``lcoding.training`` (one line per module)."""
from lcoding import solvers_newton  # noqa: E402,F401  (-s 0, 2, 7, 11)
from lcoding import solvers_dual_more  # noqa: E402,F401  (-s 4, 12, 13, 21)
from lcoding import solvers_l1  # noqa: E402,F401  (-s 5, 6)
