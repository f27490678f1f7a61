"""Old-style LIBLINEAR scripts: ``from liblinearutil import *``.

Before its 2021 PyPI packaging LIBLINEAR shipped top-level modules
(``liblinearutil``, ``liblinear``, ``commonutil``) that scripts reached with
``sys.path.append('/path/to/liblinear/python')``.  This folder holds shims of the
same names that re-export lcoding's drop-in modules; point that path line here::

    import sys, lcoding.legacy
    sys.path.insert(0, lcoding.legacy.PATH)
    from liblinearutil import *

or run the script unchanged with ``PYTHONPATH="$(python -m lcoding.legacy)"``.
"""
import os

PATH = os.path.dirname(os.path.abspath(__file__))
