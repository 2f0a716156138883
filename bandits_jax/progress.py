"""Progress of a sweep on stderr: one bar per curve on a terminal, plain lines elsewhere.

A sweep computes a curve (an algorithm with all its grid points) in chunks of seeds. A chunk of
regret runs is one `runner.run_batch` call whose progress callback (`SweepProgress.report`) runs
on the host from inside the compiled scan, every `every(horizon)` steps and once per device, with
the step the chunk has reached; a chunk of phase-level trials (`run_trials`) has no step loop and
counts only when it ends.

On a terminal (`_is_terminal`) a curve is one tqdm bar over the steps of all its chunks (horizon x
chunks; a bar over chunks for trials), showing the runs it holds (seeds x grid points), the chunk
in flight, steps per second and the time left. Messages are written above the bar, and the bar
stays as the curve's last line. Elsewhere (a CI log, a file) progress is plain lines: a
chunk's start, the step reached at each fifth of the horizon, and its end. Quiet writes nothing.

One object serves a whole sweep: a compiled chunk is reused by the next chunk of the same size,
and it calls back the function it was compiled with, so the callback must not belong to one chunk.
"""
from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager

from tqdm import tqdm

LIVE_UPDATES = 100  # callbacks per chunk on a terminal
PLAIN_UPDATES = 5  # lines per chunk elsewhere


class SweepProgress:
    """Progress of one sweep, written to `stream` (default: sys.stderr as it is now)."""

    def __init__(self, quiet: bool = False, stream=None, steps: bool = True):
        """steps: report the step a chunk has reached from inside its compiled scan (a host callback);
        False reports chunks only, and leaves the compiled programs free of callbacks, which JAX's
        persistent compilation cache can then keep (`compile_cache`)."""
        self.quiet = quiet
        self.stream = sys.stderr if stream is None else stream
        self.live = not quiet and _is_terminal(self.stream)
        self.callback = None if quiet or not steps else self.report  # what run_batch is given as `progress`
        self._lock = threading.Lock()  # callbacks may come from several devices' threads at once
        self._bar = None
        self._where, self._steps, self._chunks = "", 1, 1
        self._chunk = self._done = self._reached = 0

    def every(self, horizon: int) -> int:
        """The `progress_every` to give run_batch for this horizon."""
        return max(1, horizon // (LIVE_UPDATES if self.live else PLAIN_UPDATES))

    def log(self, message: str) -> None:
        """One line of news; on a terminal it goes above the bar in flight."""
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.write(message, file=self.stream)
        else:
            print(message, file=self.stream, flush=True)

    @contextmanager
    def curve(self, name: str, runs: int, chunks: int, horizon=None):
        """The chunks of one curve: `runs` runs in all, each chunk `horizon` steps (None: trials)."""
        self._steps, self._chunks = horizon or 1, chunks
        self._chunk = self._done = 0
        if self.live:
            self._bar = tqdm(total=chunks * self._steps, desc=f"[{name}] {runs} runs", file=self.stream,
                             unit="step" if horizon else "chunk", leave=True, dynamic_ncols=True)
        try:
            yield self
        finally:
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def start_chunk(self, where: str, note: str) -> None:
        """A chunk starts: `where` names it in plain lines, `note` says what it runs."""
        with self._lock:
            self._where, self._reached = where, 0
            self._chunk += 1
        if self._bar is not None:
            self._bar.set_postfix_str(f"chunk {self._chunk}/{self._chunks}")
        else:
            self.log(f"{where}: {note}")

    def report(self, t) -> None:
        """The runner's callback: the chunk in flight has reached step t."""
        with self._lock:
            t = int(t)
            if t <= self._reached:  # the same step from another device
                return
            self._reached = t
            if self._bar is not None:
                self._advance(self._done + min(t, self._steps))
            elif not self.quiet:
                print(f"{self._where}: t = {t}/{self._steps}", file=self.stream, flush=True)

    def end_chunk(self, message: str) -> None:
        """The chunk in flight is done; `message` (e.g. its timing) is logged."""
        with self._lock:
            self._done += self._steps
            if self._bar is not None:
                self._advance(self._done)
        self.log(f"{self._where}: {message}")

    def _advance(self, n: int) -> None:
        if n > self._bar.n:
            self._bar.update(n - self._bar.n)


def _is_terminal(stream) -> bool:
    """`isatty()`, and a window with rows where the stream has a file descriptor: tqdm hides its bar on
    a pseudo-terminal of height 0, as harnesses that record a run open, so that is a log."""
    try:
        if not stream.isatty():
            return False
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False
    try:
        return os.get_terminal_size(stream.fileno()).lines > 0
    except (AttributeError, OSError, ValueError):  # no file descriptor of its own
        return True
