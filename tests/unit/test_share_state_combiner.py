"""combine_state_batches against a per-offset model."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.coordinators.share.combiner import Combined, combine_state_batches
from shareq.coordinators.share.shard import _delta, _shape
from shareq.share.persister import StateBatch


@st.composite
def batches(draw: st.DrawFn, *, max_size: int = 8) -> list[StateBatch]:
    out = []
    for _ in range(draw(st.integers(0, max_size))):
        first = draw(st.integers(0, 60))
        length = draw(st.integers(0, 12))
        out.append(
            StateBatch(
                first_offset=first,
                last_offset=first + length,
                delivery_state=draw(st.sampled_from([0, 2, 4])),
                delivery_count=draw(st.integers(0, 2)),
            )
        )
    return out


def _model(layers: list[list[StateBatch]], start: int) -> dict[int, tuple[int, int]]:
    state: dict[int, tuple[int, int]] = {}
    for layer in layers:
        for b in layer:
            for o in range(b.first_offset, b.last_offset + 1):
                state[o] = (b.delivery_state, b.delivery_count)
    return {o: v for o, v in state.items() if o >= start}


def _past_end(
    recorded: Sequence[StateBatch], batches: Sequence[StateBatch], *, touching: bool = False
) -> list[StateBatch]:
    """``batches`` moved up so that offset 0 falls just past ``recorded``'s last run (with
    ``touching``, so that their lowest offset does: the first run may then join the last)."""
    end = recorded[-1].last_offset + 1 if recorded else 0
    if touching and batches:
        end -= min(b.first_offset for b in batches)
    return [
        StateBatch(
            first_offset=b.first_offset + end,
            last_offset=b.last_offset + end,
            delivery_state=b.delivery_state,
            delivery_count=b.delivery_count,
        )
        for b in batches
    ]


def _assert_normal_and_joined(result: Sequence[StateBatch]) -> None:
    """Sorted, disjoint, and no two adjacent runs that could be one."""
    for a, b in itertools.pairwise(result):
        assert a.first_offset <= a.last_offset < b.first_offset <= b.last_offset
        adjacent = a.last_offset + 1 == b.first_offset
        assert not (adjacent and (a.delivery_state, a.delivery_count) == (b.delivery_state, b.delivery_count))


def _folds(*, max_size: int) -> st.SearchStrategy[list[tuple[list[StateBatch], int, bool]]]:
    """Writes as the coordinator folds them: (batches, how far the start offset moves, a flag)."""
    return st.lists(
        st.tuples(batches(max_size=max_size), st.integers(0, 15), st.booleans()), min_size=1, max_size=10
    )


def _expand(result: tuple[StateBatch, ...]) -> dict[int, tuple[int, int]]:
    return {
        o: (b.delivery_state, b.delivery_count)
        for b in result
        for o in range(b.first_offset, b.last_offset + 1)
    }


@settings(max_examples=2000)
@given(current=batches(), new=batches(), start=st.sampled_from([-1, 0, 5, 20, 40, 80]))
def test_combine_matches_the_per_offset_model(
    current: list[StateBatch], new: list[StateBatch], start: int
) -> None:
    result = combine_state_batches(current, new, start)
    assert _expand(result) == _model([current, new], start)
    _assert_normal_and_joined(result)


@settings(max_examples=500)
@given(
    current=batches(), gap=st.integers(1, 3), length=st.integers(0, 3), start=st.sampled_from([-1, 30, 80])
)
def test_one_run_past_the_end_matches_the_model(
    current: list[StateBatch], gap: int, length: int, start: int
) -> None:
    if len(current) % 2:  # half the time normal already (the fast path), half the time anything
        current = list(combine_state_batches((), current, -1))
    first = max((b.last_offset for b in current), default=0) + gap
    new = [StateBatch(first_offset=first, last_offset=first + length, delivery_state=2, delivery_count=1)]
    result = combine_state_batches(current, new, start)
    assert _expand(result) == _model([current, new], start)
    for a, b in itertools.pairwise(result):
        assert a.last_offset < b.first_offset
        assert not (
            a.last_offset + 1 == b.first_offset
            and (a.delivery_state, a.delivery_count) == (2, 1) == (b.delivery_state, b.delivery_count)
        )


@settings(max_examples=500)
@given(layers=st.lists(batches(max_size=3), min_size=1, max_size=10))
def test_folding_deltas_one_by_one_equals_the_model(layers: list[list[StateBatch]]) -> None:
    state: tuple[StateBatch, ...] = ()
    for layer in layers:
        state = combine_state_batches(state, layer, -1)
    assert _expand(state) == _model(layers, -1)


def test_worked_example() -> None:
    cur = [StateBatch(first_offset=100, last_offset=119, delivery_state=0, delivery_count=1)]
    new = [StateBatch(first_offset=105, last_offset=109, delivery_state=2, delivery_count=1)]
    assert combine_state_batches(cur, new, 102) == (
        StateBatch(first_offset=102, last_offset=104, delivery_state=0, delivery_count=1),
        StateBatch(first_offset=105, last_offset=109, delivery_state=2, delivery_count=1),
        StateBatch(first_offset=110, last_offset=119, delivery_state=0, delivery_count=1),
    )


@settings(max_examples=500)
@given(current=batches(), new=batches(), start=st.sampled_from([-1, 0, 5, 20, 40, 80, 120]))
def test_runs_appended_past_the_recorded_state_match_the_model(
    current: list[StateBatch], new: list[StateBatch], start: int
) -> None:
    """The acknowledgement's usual shape: normalized state, then many runs past its end (the
    fast path), and the same with the new runs out of order or overlapping (the general one)."""
    recorded = list(combine_state_batches((), current, -1))
    shifted = _past_end(recorded, new)
    result = combine_state_batches(recorded, shifted, start)
    assert _expand(result) == _model([recorded, shifted], start)
    for a, b in itertools.pairwise(result):
        assert a.last_offset < b.first_offset


@settings(max_examples=1000)
@given(steps=_folds(max_size=4))
def test_a_result_passed_back_as_the_current_state_matches_the_model(
    steps: list[tuple[list[StateBatch], int, bool]],
) -> None:
    """As the share coordinator folds its writes: each result is the next call's current state
    (trusted, not walked again), the start offset only grows, and a write lands past the state's
    end (the usual acknowledgement), is empty (a write that only moves the start offset), or is
    anything at all."""
    state: tuple[StateBatch, ...] = ()
    model: dict[int, tuple[int, int]] = {}
    start = -1
    for layer, advance, past_end in steps:
        start += advance
        if past_end:
            layer = _past_end(state, sorted(layer, key=lambda b: b.first_offset), touching=True)
        state = combine_state_batches(state, layer, start)
        model.update(_model([layer], -1))  # the newest word on each offset wins
        model = {o: v for o, v in model.items() if o >= start}
        assert _expand(state) == model
        _assert_normal_and_joined(state)


@settings(max_examples=1000)
@given(steps=_folds(max_size=6))
def test_joined_writes_take_the_short_path_to_the_same_state(
    steps: list[tuple[list[StateBatch], int, bool]],
) -> None:
    """As the share coordinator folds the engine's deltas (joined: sorted, disjoint, no touching
    neighbours of equal state and count): found so in the walk that validates them, they are
    appended past the state without another walk, and the update carries them only pruned. Both
    equal what the general path gives (which the model checks above)."""
    state: tuple[StateBatch, ...] = ()
    start = -1
    for layer, advance, touching in steps:
        start += advance
        new = tuple(_past_end(state, combine_state_batches((), layer, -1), touching=touching))
        assert _shape(new) is True
        fast = combine_state_batches(state, new, start, joined=True)
        assert fast == combine_state_batches(state, new, start)
        assert type(fast) is Combined
        assert _delta(new, start, True) == combine_state_batches((), new, start)
        state = fast


@settings(max_examples=1000)
@given(layer=batches())
def test_a_writes_shape_is_joined_exactly_when_combining_it_alone_changes_nothing(
    layer: list[StateBatch],
) -> None:
    assert _shape(tuple(layer)) is (tuple(combine_state_batches((), layer, -1)) == tuple(layer))


def test_a_malformed_batch_is_refused_whatever_its_neighbours() -> None:
    good = StateBatch(first_offset=0, last_offset=3, delivery_state=2, delivery_count=1)
    for bad in [
        StateBatch(first_offset=5, last_offset=4, delivery_state=2, delivery_count=1),
        StateBatch(first_offset=-1, last_offset=4, delivery_state=2, delivery_count=1),
        StateBatch(first_offset=5, last_offset=6, delivery_state=1, delivery_count=1),
        StateBatch(first_offset=5, last_offset=6, delivery_state=2, delivery_count=1 << 15),
        StateBatch(first_offset=5, last_offset=6, delivery_state=2, delivery_count=-1),
    ]:
        assert _shape((good, bad)) is None
        assert _shape((bad, good)) is None
