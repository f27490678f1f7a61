"""LIBLINEAR's solvers, each driver beside its typed kernel; ``solvers`` lists them
by ``-s`` number."""
