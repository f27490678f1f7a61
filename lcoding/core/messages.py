"""Progress messages: LIBLINEAR's ``info()`` text on stdout unless quiet, and phase
events (one whole line each) for whoever listens."""
from __future__ import annotations

import sys


class Messages:
    """LIBLINEAR's ``info()``: progress text on stdout unless quiet.

    ``events``: an optional callable that receives *events* -- one line of text per
    step of a training (a k-means iteration and its inertia, a class's solve with its
    passes and time), sent by :func:`event`.  They are not part of LIBLINEAR's text,
    which stays byte-identical; the scikit-learn estimators log them
    (``verbose=1``).  Each event is one call, so lines from ``-m`` threads never mix.
    """

    def __init__(self, quiet: bool = False, stream=None, events=None):
        self.quiet = quiet
        self.stream = stream
        self.events = events

    def __call__(self, text: str) -> None:
        if not self.quiet:
            stream = self.stream if self.stream is not None else sys.stdout
            stream.write(text)
            stream.flush()

    def event(self, text: str) -> None:
        if self.events is not None:
            self.events(text)


def event(info, text: str) -> None:
    """Send one event line through ``info`` when it takes events (a :class:`Messages`
    or any object with an ``event`` method); plain ``info`` callables ignore them."""
    send = getattr(info, "event", None)
    if send is not None:
        send(text)
