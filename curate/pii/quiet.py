"""Presidio's log records stay out of curate's log.

Presidio logs what it is analysing in places: IbanRecognizer logs the text it failed to
validate at ERROR, the context enhancer logs context words at DEBUG. A record from a
Presidio logger emitted while a document is analysed is therefore dropped and counted;
the stage reports the count, never the records. While the analyzer is built, only
errors pass: Presidio warns once per recognizer of a language not configured, which is
noise on every worker of every run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

LOGGERS = ("presidio-analyzer", "presidio-anonymizer", "tldextract", "phonenumbers")


class _Drop(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.active = False
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if self.active:
            self.dropped += 1
            return False
        return True


_FILTER = _Drop()


def install() -> None:
    """Attach the filter to Presidio's loggers (idempotent)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


@contextmanager
def building() -> Iterator[None]:
    """Only Presidio's errors reach the log while the analyzer is built."""
    loggers = [logging.getLogger(name) for name in LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


@contextmanager
def silenced() -> Iterator[None]:
    """Drop Presidio's records for the duration (documents are being analysed)."""
    _FILTER.active = True
    try:
        yield
    finally:
        _FILTER.active = False


def dropped() -> int:
    """Records dropped so far in this process."""
    return _FILTER.dropped
