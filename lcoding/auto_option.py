"""The option form ``-C -L auto [-b seconds]`` of automatic method selection (issue 18,
part 2), shared by ``lcoding.liblinearutil.train`` and ``lcoding-train``.

It sits at the interface layer, beside them, because the router
(:mod:`lcoding.training`) cannot send ``-L auto`` to :mod:`lcoding.select`: the
selector imports the router.  The router refuses ``-L auto`` with a message instead.
"""
from __future__ import annotations

import math

from lcoding.core.messages import Messages
from lcoding.core.options import AUTO_NR_FOLD, TrainParams, parse_train_options
from lcoding.methods.local_search import LocalSearchResult
from lcoding import select

# the options -C -L auto reads; the candidates set every other one
AUTO_OPTIONS = ("-C", "-L", "-b", "-v", "-S", "-m", "-q")


def select_from_options(y, x, params: TrainParams,
                        info: Messages | None = None) -> LocalSearchResult:
    """``-C -L auto``: :func:`lcoding.select.select` with the budget ``-b``, the seed
    ``-S``, the folds of ``-v`` (:data:`~lcoding.core.options.AUTO_NR_FOLD` = 3
    without it), ``-m`` threads, and no refit (LIBLINEAR's ``-C`` trains no model
    either).

    Returns the named tuple of the local ``-C`` search, so that a script reads both
    alike: the winner's C, its option string (``train(y, x, best_options)`` fits it)
    and its CV accuracy as a fraction (NaN when no candidate ran).  ``info`` (default:
    silent under ``-q``) gets the options the search ignores, one line per trial and
    the note of the budget; the interfaces print the summary line."""
    info = info if info is not None else Messages(params.quiet)
    ignored = [flag for flag in dict.fromkeys(params.given) if flag not in AUTO_OPTIONS]
    if ignored:
        # accepted, as the router accepts options its method does not read, but said:
        # the candidates' own -s, -c, -B ... replace them
        info(f"-C -L auto: ignoring option{'s' if len(ignored) > 1 else ''} "
             f"{' '.join(ignored)} (the search chooses the method and its parameters)\n")
    # -v's folds when given; else AUTO_NR_FOLD (the parser's value too, but parameters
    # built field by field have no parser to set it)
    nr_fold = params.nr_fold if params.flag_cross_validation else AUTO_NR_FOLD
    result = select.select(y, x, budget_s=params.budget_s, seed=params.seed, nr_fold=nr_fold,
                           n_threads=params.n_threads, refit=False, info=info)
    if result.note:
        info(f"-C -L auto: {result.note}\n")
    rate = math.nan if result.cv_error is None else 1.0 - result.cv_error / 100.0
    return LocalSearchResult(parse_train_options(result.best_options).C, result.best_options,
                             rate)
