"""The successor record's codec: one encoding per record, and nothing else accepted."""

from __future__ import annotations

from datetime import UTC, datetime

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from notary.core.entry import EntryError, decode_entry
from notary.core.ids import format_issued_at
from notary.core.successor import (
    REASONS,
    SUCCESSOR_SPEC,
    SuccessorError,
    SuccessorRecord,
    decode_successor,
)

_text = st.text(min_size=1, max_size=40)
_times = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 1, 1),
                      timezones=st.just(UTC)).map(format_issued_at)



def _record(**over: object) -> SuccessorRecord:
    values: dict[str, object] = {
        "origin": "notary.example/2027-01-01", "vkeys": ("a+1+AAAA", "a+2+BBBB"),
        "previous": "notary.example", "frozen_at": "2027-01-01T00:00:00.000Z",
        "reason": "operator"}
    values.update(over)
    return SuccessorRecord(**values)  # type: ignore[arg-type]


@given(st.data())
def test_round_trip(data: st.DataObject) -> None:
    origin = data.draw(_text)
    previous = data.draw(_text.filter(lambda p: p != origin))
    record = SuccessorRecord(origin, tuple(data.draw(st.lists(_text, min_size=1, max_size=3))),
                             previous, data.draw(_times), data.draw(st.sampled_from(REASONS)))
    raw = record.encode()
    assert raw == cbor2.dumps(record.to_map(), canonical=True)
    assert decode_successor(raw) == record
    with pytest.raises(EntryError):  # never taken for a tool-call entry
        decode_entry(raw)


@given(st.dictionaries(st.text(max_size=10), st.text(max_size=10) | st.integers(), max_size=7))
def test_refuses_other_maps(obj: dict[str, object]) -> None:
    with pytest.raises(SuccessorError):
        decode_successor(cbor2.dumps(obj, canonical=True))


@pytest.mark.parametrize("change", [
    {"spec": "rs-tool-call/1"}, {"reason": "bored"}, {"vkeys": []}, {"vkeys": "a"},
    {"frozen_at": "2027-01-01T00:00:00Z"}, {"origin": "notary.example"}, {"extra": 1},
])
def test_refuses_a_record_that_is_almost_right(change: dict[str, object]) -> None:
    obj = {**_record().to_map(), **change}
    with pytest.raises(SuccessorError):
        decode_successor(cbor2.dumps(obj, canonical=True))


def test_refuses_a_non_canonical_encoding() -> None:
    obj = _record().to_map()
    assert obj["spec"] == SUCCESSOR_SPEC
    unsorted = cbor2.dumps(dict(reversed(list(obj.items()))))
    assert decode_successor(cbor2.dumps(obj, canonical=True)) == _record()
    with pytest.raises(SuccessorError, match="deterministic"):
        decode_successor(unsorted)
    with pytest.raises(SuccessorError):
        decode_successor(cbor2.dumps(obj, canonical=True) + b"\x00")
