"""RecordState transitions as a table; the diversion rule."""

from __future__ import annotations

import pytest

from shareq.share.errors import IllegalStateTransition, ShareEngineBug
from shareq.share.record_state import (
    TERMINAL,
    TRANSITIONS,
    RecordState,
    release_target,
    validate_transition,
)

S = RecordState


def test_wire_ids() -> None:
    assert [int(s) for s in (S.AVAILABLE, S.ACQUIRED, S.ACKNOWLEDGED, S.ARCHIVING, S.ARCHIVED)] == [
        0,
        1,
        2,
        3,
        4,
    ]


@pytest.mark.parametrize("old", list(S))
@pytest.mark.parametrize("new", list(S))
def test_table(old: RecordState, new: RecordState) -> None:
    allowed = {
        (S.AVAILABLE, S.ACQUIRED),
        (S.ACQUIRED, S.AVAILABLE),
        (S.ACQUIRED, S.ACKNOWLEDGED),
        (S.ACQUIRED, S.ARCHIVING),
        (S.ACQUIRED, S.ARCHIVED),
        (S.ARCHIVING, S.ARCHIVED),
        (S.ACQUIRED, S.TX_PENDING),
        (S.TX_PENDING, S.ACKNOWLEDGED),
        (S.TX_PENDING, S.ARCHIVING),
        (S.TX_PENDING, S.ARCHIVED),
        (S.TX_PENDING, S.ACQUIRED),
    }
    if (old, new) in allowed:
        validate_transition(old, new)
    else:
        with pytest.raises(IllegalStateTransition):
            validate_transition(old, new)


def test_terminal_states_are_sinks_and_nothing_loops() -> None:
    for state in TERMINAL:
        assert TRANSITIONS[state] == frozenset()
    for state, targets in TRANSITIONS.items():
        assert state not in targets
    assert TRANSITIONS[S.AVAILABLE] == {S.ACQUIRED}


def test_illegal_transition_is_a_local_bug() -> None:
    assert issubclass(IllegalStateTransition, ShareEngineBug)


def test_forced_archive_only_from_available() -> None:
    validate_transition(S.AVAILABLE, S.ARCHIVED, forced_archive=True)
    with pytest.raises(IllegalStateTransition):
        validate_transition(S.ACKNOWLEDGED, S.ARCHIVED, forced_archive=True)
    with pytest.raises(IllegalStateTransition):
        validate_transition(S.AVAILABLE, S.ARCHIVED)


def test_diversion_rule() -> None:
    assert release_target(1, 5, dlq_enabled=False) is S.AVAILABLE
    assert release_target(4, 5, dlq_enabled=True) is S.AVAILABLE
    assert release_target(5, 5, dlq_enabled=False) is S.ARCHIVED
    assert release_target(5, 5, dlq_enabled=True) is S.ARCHIVING
