"""A sweep's progress display: one bar per curve on a terminal, plain lines elsewhere, nothing when quiet."""
import io
import re

from bandits_jax.progress import SweepProgress


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self):
        return True


def shown_lines(text: str) -> list:
    """The lines a terminal keeps of `text`: each as the last carriage return before its newline left it,
    without the spaces a bar writes to blank out a longer line it replaces."""
    return [line.rsplit("\r", 1)[-1].rstrip(" ") for line in text.split("\n")]


def _two_chunks(progress, name: str, reports=(60, 60, 180, 300, 300)) -> None:
    """One curve of 8 runs in two chunks of T = 300, each step reported twice (as two devices do)."""
    with progress.curve(name, runs=8, chunks=2, horizon=300):
        for b in range(2):
            progress.start_chunk(f"[{name}] seeds {4 * b}..{4 * b + 3} (chunk {b + 1}/2)", "running T = 300")
            for t in reports:
                progress.report(t)
            progress.end_chunk(f"done (compile {1 - b}.0 s, run 2.0 s)")


def test_terminal_shows_one_bar_per_curve_over_all_its_chunks():
    term = Terminal()
    progress = SweepProgress(stream=term)
    assert progress.live and progress.callback == progress.report and progress.every(300) == 3
    progress.log("[NeuralUCB] seeds 8, 9 taken from the curve cache")
    _two_chunks(progress, "NeuralUCB")
    _two_chunks(progress, "KernelUCB", reports=(150,))  # the chunk's end completes its steps
    with progress.curve("RAGE", runs=6, chunks=3):  # phase-level trials: a bar over chunks
        for b in range(3):
            progress.start_chunk(f"[RAGE] seeds {2 * b}..{2 * b + 1} (chunk {b + 1}/3)", "running 2 trials")
            progress.end_chunk("done (compile 0.5 s, run 0.1 s)")
    text = term.getvalue()
    lines = shown_lines(text)
    bars = [line for line in lines if " runs: " in line]
    assert [b.split(":")[0] for b in bars] == ["[NeuralUCB] 8 runs", "[KernelUCB] 8 runs", "[RAGE] 6 runs"]
    assert bars[0].startswith("[NeuralUCB] 8 runs: 100%|") and "| 600/600 [" in bars[0]
    assert bars[0].endswith("step/s, chunk 2/2]")
    assert bars[1].startswith("[KernelUCB] 8 runs: 100%|") and "| 600/600 [" in bars[1]
    assert bars[2].startswith("[RAGE] 6 runs: 100%|") and "| 3/3 [" in bars[2] and "chunk/s, chunk 3/3]" in bars[2]
    # messages stay on lines of their own above the bar; no plain progress lines
    assert lines[:3] == ["[NeuralUCB] seeds 8, 9 taken from the curve cache",
                         "[NeuralUCB] seeds 0..3 (chunk 1/2): done (compile 1.0 s, run 2.0 s)",
                         "[NeuralUCB] seeds 4..7 (chunk 2/2): done (compile 0.0 s, run 2.0 s)"]
    assert [line.split(":")[0] for line in lines] == [  # every curve's bar stays, below its messages
        "[NeuralUCB] seeds 8, 9 taken from the curve cache", "[NeuralUCB] seeds 0..3 (chunk 1/2)",
        "[NeuralUCB] seeds 4..7 (chunk 2/2)", "[NeuralUCB] 8 runs", "[KernelUCB] seeds 0..3 (chunk 1/2)",
        "[KernelUCB] seeds 4..7 (chunk 2/2)", "[KernelUCB] 8 runs", "[RAGE] seeds 0..1 (chunk 1/3)",
        "[RAGE] seeds 2..3 (chunk 2/3)", "[RAGE] seeds 4..5 (chunk 3/3)", "[RAGE] 6 runs", ""]
    assert "t = " not in text and "running" not in text
    # after the first chunk the bar is redrawn at half of the curve's steps
    after_first = text.split("(chunk 1/2): done (compile 1.0 s, run 2.0 s)\n", 1)[1]
    first_frame = after_first.split("\r")[1]
    assert re.match(r"\[NeuralUCB\] 8 runs:  50%\|.*\| 300/600 \[", first_frame), first_frame


def test_plain_lines_when_not_a_terminal():
    log = io.StringIO()  # isatty() is False, as in a CI log
    progress = SweepProgress(stream=log)
    assert not progress.live and progress.every(300) == 60
    _two_chunks(progress, "NeuralUCB")
    assert log.getvalue().splitlines() == [
        "[NeuralUCB] seeds 0..3 (chunk 1/2): running T = 300",
        "[NeuralUCB] seeds 0..3 (chunk 1/2): t = 60/300",
        "[NeuralUCB] seeds 0..3 (chunk 1/2): t = 180/300",
        "[NeuralUCB] seeds 0..3 (chunk 1/2): t = 300/300",
        "[NeuralUCB] seeds 0..3 (chunk 1/2): done (compile 1.0 s, run 2.0 s)",
        "[NeuralUCB] seeds 4..7 (chunk 2/2): running T = 300",
        "[NeuralUCB] seeds 4..7 (chunk 2/2): t = 60/300",
        "[NeuralUCB] seeds 4..7 (chunk 2/2): t = 180/300",
        "[NeuralUCB] seeds 4..7 (chunk 2/2): t = 300/300",
        "[NeuralUCB] seeds 4..7 (chunk 2/2): done (compile 0.0 s, run 2.0 s)",
    ]


def test_quiet_writes_nothing_even_on_a_terminal():
    term = Terminal()
    progress = SweepProgress(quiet=True, stream=term)
    assert not progress.live and progress.callback is None
    progress.log("[NeuralUCB] all 4 seeds already stored")
    _two_chunks(progress, "NeuralUCB")
    assert term.getvalue() == ""
