"""How a failed run says its tool ended (run/attempt.exit_reason)."""

from __future__ import annotations

from storbench.run.attempt import exit_reason
from storbench.tools import get_tool


def test_a_tools_own_exit_status_above_128_is_not_read_as_a_signal():
    """vdbench ends a failed run (its master's 'Slave hd2-0 prematurely terminated', seen
    live when a slave's ssh was killed) with System.exit(-99): status 157, which a shell also
    gives a tool killed by SIGIO."""
    assert exit_reason(157, get_tool("vdbench").exit_statuses) == (
        "exited 157 (vdbench's own failure exit, -99: see its message)"
    )
    assert exit_reason(157, get_tool("fio").exit_statuses) == (
        "exited 157 (as a tool killed by SIGIO does)"
    )
    assert exit_reason(137) == "exited 137 (as a tool killed by SIGKILL does)"
    assert exit_reason(-9) == "killed by SIGKILL" and exit_reason(124) == "timed out"
