"""lcoding: locally linear classifiers behind a LIBLINEAR-compatible interface."""
__version__ = "0.1.0"
