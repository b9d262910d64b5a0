"""bench/retime_run.on_clock, the setup/time/teardown frame of the two re-timing benches: the
clock is torn down once however a problem ends, and a failure becomes the row's error."""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from retime_run import on_clock  # noqa: E402


class Clock:
    def __init__(self):
        self.teardowns = 0

    def teardown(self):
        self.teardowns += 1


def boom(*_):
    raise RuntimeError("out of resource: shared memory\nsecond line")


def test_body_gets_setups_result_and_the_clock_is_torn_down_once():
    clock, row = Clock(), {}
    out = on_clock(clock, row, lambda: {"a": 1}, lambda fns: row.update(seen=fns))
    assert out is row and row == {"seen": {"a": 1}} and clock.teardowns == 1


@pytest.mark.parametrize("setup, body, error", [
    (boom, lambda fns: None, "setup: RuntimeError: out of resource: shared memory"),
    (lambda: {}, boom, "RuntimeError: out of resource: shared memory"),
])
def test_a_failure_becomes_the_rows_error_and_still_tears_down(setup, body, error):
    clock, row = Clock(), {"problem": "p"}
    assert on_clock(clock, row, setup, body) == {"problem": "p", "error": error}
    assert clock.teardowns == 1


def test_a_setup_failure_never_runs_the_body():
    ran = []
    on_clock(Clock(), {}, boom, lambda fns: ran.append(fns))
    assert ran == []
