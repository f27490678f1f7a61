"""Progress messages: LIBLINEAR's ``info()`` text on stdout unless quiet."""
from __future__ import annotations

import sys


class Messages:
    """LIBLINEAR's ``info()``: progress text on stdout unless quiet."""

    def __init__(self, quiet: bool = False, stream=None):
        self.quiet = quiet
        self.stream = stream

    def __call__(self, text: str) -> None:
        if not self.quiet:
            stream = self.stream if self.stream is not None else sys.stdout
            stream.write(text)
            stream.flush()

