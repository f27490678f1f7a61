"""Import the modules that register solvers into the tables of
``lcoding.solvers`` / ``lcoding.training`` (one line per module)."""
from lcoding import solvers_newton  # noqa: E402,F401  (-s 0, 2, 7, 11)
