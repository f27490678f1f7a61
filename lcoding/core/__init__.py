"""Core: the option table and parameters, validated rows, model base classes, the
one-vs-rest helper, seeds, threads and messages.  Imports nothing above it."""
