"""lcoding: locally linear classifiers behind a LIBLINEAR-compatible interface."""
__version__ = "0.1.0"


def _require_built_kernels() -> None:
    """A source checkout whose kernels are not compiled shadows an installed lcoding
    when Python runs in the checkout: say so in one line instead of failing later on
    a missing ``lcoding.core._predict``."""
    import os
    from importlib.machinery import EXTENSION_SUFFIXES
    here = os.path.dirname(os.path.abspath(__file__))
    kernel = os.path.join(here, "core", "_predict")
    if not any(os.path.exists(kernel + suffix) for suffix in EXTENSION_SUFFIXES):
        raise ImportError(
            f"lcoding: the source tree {os.path.dirname(here)} is not built: run "
            f"`python setup.py build_ext --inplace` there, or run Python from another "
            f"folder to use the installed lcoding")


_require_built_kernels()

# the scikit-learn estimators, imported on first use (scikit-learn is optional)
_SKLEARN_NAMES = ("LocallyLinearSVC", "AnchorPlanesSVC", "LLCJointSVC", "KQMetricsClassifier",
                  "InvariantSVC", "LinearClassifier", "AutoLocalClassifier")


def __getattr__(name):
    if name in _SKLEARN_NAMES:
        from lcoding import sklearn as _sklearn
        return getattr(_sklearn, name)
    raise AttributeError(f"module 'lcoding' has no attribute {name!r}")
