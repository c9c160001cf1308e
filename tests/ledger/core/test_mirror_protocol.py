"""tlog-mirror codecs and checks (C2SP/C2SP at 5ba5ee8): the add-entries header bytes, the
canonical package sequence, the mirror-info body, and the checks made before any package."""

from __future__ import annotations

import pytest

from ledger.core.mirror_protocol import (
    MAX_EXCESS_ENTRIES,
    AddEntriesHeader,
    MirrorInfo,
    MirrorProtocolError,
    check_upload,
    format_add_entries_header,
    format_mirror_info,
    format_package,
    package_at,
    package_count,
    parse_mirror_info,
)


def test_header_bytes_are_the_specs() -> None:
    got = format_add_entries_header(AddEntriesHeader("ex/log", 300, 900, b"tk"))
    assert got == (b"\x00\x06ex/log" + (300).to_bytes(8, "big") + (900).to_bytes(8, "big")
                   + b"\x00\x02tk")
    with pytest.raises(MirrorProtocolError):
        format_add_entries_header(AddEntriesHeader("", 0, 0))
    with pytest.raises(MirrorProtocolError):
        format_add_entries_header(AddEntriesHeader("x", 0, 1 << 64))


def test_the_canonical_sequence_is_cut_at_multiples_of_256() -> None:
    assert package_count(7, 7) == 0
    assert package_count(0, 1) == 1
    assert package_count(255, 257) == 2
    spans = [(p.base, p.start, p.end) for p in
             (package_at(300, 1000, i) for i in range(package_count(300, 1000)))]
    assert spans == [(256, 300, 512), (512, 512, 768), (768, 768, 1000)]
    with pytest.raises(MirrorProtocolError):
        package_at(300, 1000, 3)


def test_a_package_is_entries_then_num_hashes_then_hashes() -> None:
    assert format_package([b"a", b""], [b"\x11" * 32]) == \
        b"\x00\x01a\x00\x00\x01" + b"\x11" * 32
    with pytest.raises(MirrorProtocolError):
        format_package([], [b"\x00" * 32] * 64)
    with pytest.raises(MirrorProtocolError):
        format_package([b"x" * 65536], [])


def test_mirror_info_is_three_lines_and_read_strictly() -> None:
    body = format_mirror_info(MirrorInfo(900, 512, b"\x01\x02"))
    assert body == b"900\n512\nAQI=\n"
    assert parse_mirror_info(body) == MirrorInfo(900, 512, b"\x01\x02")
    assert parse_mirror_info(b"5\n0\n\n") == MirrorInfo(5, 0, b"")
    for bad in (b"900\n512\n", b"0900\n1\n\n", b"1\n2\n!!\n", b"1\n2\n\n\n",
                b"18446744073709551616\n0\n\n"):
        with pytest.raises(MirrorProtocolError):
            parse_mirror_info(bad)


def test_the_checks_before_any_package_are_the_specs() -> None:
    def status(start: int, end: int, *, known: bool = True, mirror: int = 0,
               nxt: int = 0) -> int:
        return check_upload(start, end, known_end=known, mirror_size=mirror,
                            next_entry=nxt).status

    assert status(0, 10) == 0
    assert status(11, 10) == 400
    assert status(0, 10, known=False) == 409
    assert status(0, 10, mirror=20, nxt=20) == 409  # upload_end below the mirror checkpoint
    assert status(6, 10, nxt=5) == 409  # upload_start past the next entry
    assert status(5, 1000, nxt=5 + MAX_EXCESS_ENTRIES) == 0
    assert status(5, 1000, nxt=6 + MAX_EXCESS_ENTRIES) == 409  # too many resent entries
    assert status(10, 10, mirror=10, nxt=10) == 0  # an empty upload at the mirror's size
