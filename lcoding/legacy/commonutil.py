"""Legacy top-level ``commonutil`` module: lcoding's drop-in ``lcoding.commonutil``."""
from lcoding.commonutil import *  # noqa: F401,F403
from lcoding.commonutil import __all__  # noqa: F401
