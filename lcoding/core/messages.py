"""Progress messages: LIBLINEAR's ``info()`` text on stdout unless quiet, and phase
events (one whole line each) for whoever listens."""
from __future__ import annotations

import sys
import threading


class Messages:
    """LIBLINEAR's ``info()``: progress text on stdout unless quiet.

    *Events* are one line of text per step of a training (a k-means iteration and
    its inertia, a class's solve with its passes and time), sent by :func:`event`.
    They are not part of LIBLINEAR's text: ``events`` (an optional callable) receives
    them -- the scikit-learn estimators log them -- and with ``print_events`` they are
    printed too, each on a line of its own (a line begun by LIBLINEAR's progress dots
    is ended first), under one lock, so lines from ``-m`` threads never mix.  The
    router prints them for the lcoding methods only: the plain LIBLINEAR solvers'
    text stays byte-identical.
    """

    def __init__(self, quiet: bool = False, stream=None, events=None,
                 print_events: bool = False):
        self.quiet = quiet
        self.stream = stream
        self.events = events
        self.print_events = print_events
        self._lock = threading.Lock()
        self._line_open = False         # the last text written did not end a line

    def __call__(self, text: str) -> None:
        if not self.quiet and text:
            with self._lock:
                self._write(text)

    def _write(self, text: str) -> None:
        stream = self.stream if self.stream is not None else sys.stdout
        stream.write(text)
        stream.flush()
        self._line_open = not text.endswith("\n")

    def event(self, text: str) -> None:
        if self.events is not None:
            self.events(text)
        if self.print_events and not self.quiet:
            with self._lock:
                self._write(("\n" if self._line_open else "") + text + "\n")

    def progress_line(self, text: str) -> None:
        """A line a method has always printed that is an event too (k q-metrics
        passes, LLC-JO epochs): printed once, sent to ``events``."""
        self(text + "\n")
        if self.events is not None:
            self.events(text)

    def printing_events(self) -> "Messages":
        """The same messages, printing the events as well."""
        return Messages(self.quiet, self.stream, self.events, print_events=True)


def event(info, text: str) -> None:
    """Send one event line through ``info`` when it takes events (a :class:`Messages`
    or any object with an ``event`` method); plain ``info`` callables ignore them."""
    send = getattr(info, "event", None)
    if send is not None:
        send(text)


def progress_line(info, text: str) -> None:
    """``info(text + "\\n")`` that is also an event (:meth:`Messages.progress_line`)."""
    send = getattr(info, "progress_line", None)
    if send is not None:
        send(text)
    else:
        info(text + "\n")
        event(info, text)
