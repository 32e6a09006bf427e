"""The agent reads the binary's protocol lines (docs/fakegen.md) as they come."""

import io

from workers.agent.progress import MAX_LINE, ProgressReader, checkpoint_step


def test_a_checkpoints_step_is_read_from_its_line():
    assert checkpoint_step("/work/ck/state.json step=40") == 40
    assert checkpoint_step("/work/my ckpt/state.json step=7") == 7  # a path with a space
    assert checkpoint_step("/work/ck/state.json") is None
    assert checkpoint_step("/work/ck/step=x") is None
    assert checkpoint_step("/work/ck/state.json step=-1") is None


def test_each_checkpoint_is_heard_as_its_line_is_read():
    heard: list[int | None] = []
    lines = "PROGRESS 0.2500 step=1/4\nCHECKPOINT /ck/a step=1\nnoise\nCHECKPOINT /ck/b\n"
    reader = ProgressReader(io.StringIO(lines), heard.append)
    reader.start()
    reader.join(timeout=5)
    assert heard == [1, None] and reader.progress == 0.25
    assert reader.take_checkpointed() and not reader.take_checkpointed()


def test_a_listener_that_fails_does_not_stop_the_reading():
    def fails(step: int | None) -> None:
        raise RuntimeError("storage gone")

    reader = ProgressReader(io.StringIO("CHECKPOINT /ck/a step=1\nPROGRESS 0.5000\n"), fails)
    reader.start()
    reader.join(timeout=5)
    assert reader.progress == 0.5


def test_the_step_a_binary_stopped_at_is_that_of_a_checkpoint_announced_after_the_ask():
    lines = "CHECKPOINT /ck/a step=4\nCHECKPOINT /ck/b step=6\n"
    reader = ProgressReader(io.StringIO(lines))
    reader.start()
    reader.join(timeout=5)
    assert reader.checkpoints_heard() == 2
    assert reader.step_since(1) == 6  # asked to stop after the first: it wrote step 6 then
    assert reader.step_since(2) is None  # nothing announced since the ask: no step known


def test_a_line_without_end_is_read_in_pieces_of_bounded_size():
    copied: list[str] = []
    reader = ProgressReader(io.StringIO("x" * (5 * MAX_LINE + 7) + "\nPROGRESS 0.5000\n"),
                            copy=copied.append)
    reader.start()
    reader.join(timeout=5)
    assert max(map(len, copied)) == MAX_LINE and "".join(copied).count("x") == 5 * MAX_LINE + 7
    assert reader.progress == 0.5  # the lines after it are read as ever


def test_a_step_int_cannot_read_or_the_database_cannot_hold_is_no_step():
    assert checkpoint_step("/ck/a step=²") is None  # isdigit() passes it, int() refuses it
    assert checkpoint_step("/ck/a step=١٢") is None  # decimal digits, not ASCII ones
    assert checkpoint_step("/ck/a step=" + "9" * 19) is None  # beyond a bigint
    assert checkpoint_step("/ck/a step=" + "9" * 18) == 10**18 - 1


def test_a_line_that_cannot_be_read_does_not_stop_the_reading():
    """A reader that died would leave stdout undrained: the binary blocks on a full pipe
    and is killed as hung, try after try."""
    heard: list[int | None] = []
    lines = ("PROGRESS 0.2500\nCHECKPOINT /ck/a step=²\nPROGRESS nan\nPROGRESS inf\n"
             "CHECKPOINT /ck/b step=2\n")
    reader = ProgressReader(io.StringIO(lines), heard.append)
    reader.start()
    reader.join(timeout=5)
    assert heard == [None, 2] and reader.progress == 0.25


def test_any_failure_on_a_line_is_logged_once_and_the_reading_goes_on(caplog):
    def fails(line: str) -> None:
        raise RuntimeError("a fault of the agent's own")

    stream = io.StringIO("PROGRESS 0.2500\n" * 3)
    reader = ProgressReader(stream, copy=fails)
    reader.start()
    reader.join(timeout=5)
    assert stream.read() == ""  # drained to the end
    assert [r.levelname for r in caplog.records] == ["ERROR"]
