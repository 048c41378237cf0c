"""SIGKILL a writer at random points; every write it reported successful must survive."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from shareq.persister.builtin import FlushMode

sys.path.insert(0, str(Path(__file__).parent))
import share_state_writer as writer

CHILD = Path(__file__).with_name("share_state_writer.py")


def _run_until_killed(
    directory: Path, mode: FlushMode, kill_after: float, reported: set[tuple[int, int]], persister: str
) -> None:
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(directory), mode.value, str(kill_after), persister],
        stdout=subprocess.PIPE,
        env=os.environ.copy(),
    )
    try:
        assert child.stdout is not None
        for line in child.stdout:  # until the child's own SIGKILL closes the pipe
            if line != b"ready\n":
                k, offset = line.split()
                reported.add((int(k), int(offset)))
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", [FlushMode.GROUP, FlushMode.NONE])
def test_reported_writes_survive_sigkill(tmp_path: Path, mode: FlushMode, persister: str) -> None:
    rng = random.Random(932)
    reported: set[tuple[int, int]] = set()
    for _ in range(8):
        _run_until_killed(tmp_path, mode, rng.uniform(0.3, 2.0), reported, persister)
    assert len(reported) > 100

    async def check() -> None:
        p, logs = writer.open_persister(tmp_path, persister=persister)
        await p.load()
        missing = []
        for k, key in enumerate(writer.KEYS):
            state = await p.read_state(key, leader_epoch=0)
            assert state is not None
            acked = writer.acked_offsets(state.state_batches)
            missing += [
                (k, o) for kk, o in reported if kk == k and o >= state.start_offset and o not in acked
            ]
        await p.close()
        logs.close()
        assert not missing, f"{len(missing)} reported writes lost, e.g. {sorted(missing)[:5]}"

    asyncio.run(asyncio.wait_for(check(), timeout=60))
