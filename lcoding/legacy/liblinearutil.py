"""Legacy top-level ``liblinearutil`` module: lcoding's drop-in ``lcoding.liblinearutil``."""
from lcoding.liblinearutil import *  # noqa: F401,F403
from lcoding.liblinearutil import __all__  # noqa: F401
