"""Legacy top-level ``liblinear`` module: lcoding's drop-in ``lcoding.liblinear``."""
from lcoding.liblinear import *  # noqa: F401,F403
from lcoding.liblinear import __all__  # noqa: F401
