"""Import the modules that register solvers into the tables of
``lcoding.solvers`` / ``lcoding.training`` (one line per module)."""
