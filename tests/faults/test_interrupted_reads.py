"""Ctrl-C (or SIGTERM, which the command line turns into the same KeyboardInterrupt) may land
anywhere in a read of a named file: the read then ends in that interrupt or in its bytes,
never in another error, and never closes a descriptor twice (a number reused by then would
be another file's: a model's config.json once read as 'Bad file descriptor')."""

from __future__ import annotations

import os
import signal

from tuner.vocabulary import inputs

ROUNDS = 3000


class Landed(BaseException):
    """The timer's interrupt (KeyboardInterrupt's kind, not KeyboardInterrupt itself, so
    one that lands outside a read cannot stop the test run)."""


def _interrupt(signum, frame):
    raise Landed


def test_an_interrupt_anywhere_in_a_read_ends_it_cleanly(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"a": 1}')
    sentinel = tmp_path / "sentinel"
    sentinel.write_bytes(b"kept")
    keep = os.open(sentinel, os.O_RDONLY)  # a descriptor a second close could take
    previous = signal.signal(signal.SIGALRM, _interrupt)
    interrupted = 0
    try:
        for i in range(ROUNDS):
            try:
                # a timer that fires within the read, at a different point each round
                signal.setitimer(signal.ITIMER_REAL, 1e-6 * (1 + i % 60))
                try:
                    assert inputs.read_bytes(path, inputs.MODEL_CONFIG) == b'{"a": 1}'
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except Landed:
                interrupted += 1
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert os.pread(keep, 4, 0) == b"kept"
    os.close(keep)
    assert interrupted  # the timer landed inside reads
