"""tlog-tiles coordinates and paths."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.tiles import (
    ENTRIES_LEVEL,
    Tile,
    TilePathError,
    decode_index,
    encode_index,
    parse_tile_path,
    tiles_for_size,
)


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "000"), (5, "005"), (999, "999"), (1000, "x001/000"), (1234067, "x001/x234/067")],
)
def test_index_encoding(n: int, text: str) -> None:
    assert encode_index(n) == text
    assert decode_index(text) == n


@given(st.integers(min_value=0, max_value=2**48))
def test_index_round_trip(n: int) -> None:
    assert decode_index(encode_index(n)) == n


def test_tlog_tiles_example_size_70000() -> None:
    tiles = tiles_for_size(70_000)
    level0 = [t for t in tiles if t.level == 0]
    assert len([t for t in level0 if t.is_full]) == 273
    assert [t.path() for t in level0 if not t.is_full] == ["tile/0/273.p/112"]
    level1 = [t for t in tiles if t.level == 1]
    assert [t.path() for t in level1] == ["tile/1/000", "tile/1/001.p/17"]
    assert [t.path() for t in tiles if t.level == 2] == ["tile/2/000.p/1"]
    assert max(t.level for t in tiles) == 2
    bundles = [t for t in tiles_for_size(70_000, entries=True) if t.is_entries]
    assert bundles[-1].path() == "tile/entries/273.p/112"


@pytest.mark.parametrize(
    ("path", "tile"),
    [
        ("tile/0/000", Tile(0, 0)),
        ("tile/0/x001/x234/067", Tile(0, 1234067)),
        ("tile/1/001.p/17", Tile(1, 1, 17)),
        ("tile/entries/273.p/112", Tile(ENTRIES_LEVEL, 273, 112)),
        ("tile/63/000", Tile(63, 0)),
    ],
)
def test_parse_tile_path(path: str, tile: Tile) -> None:
    assert parse_tile_path(path) == tile
    assert tile.path() == path


@pytest.mark.parametrize(
    "path",
    [
        "tile/0/0", "tile/0/0000", "tile/0/x000/001", "tile/0/001.p/0", "tile/0/001.p/256",
        "tile/0/001.p/007", "tile/64/000", "tile/01/000", "tile/-1/000", "tile/0/x01/000",
        "tile/0/1000", "tile/entries/000.p/", "tile/0/000/", "/tile/0/000", "tile/0/abc",
        "tile/0/x001", "tile/0/000.p/1/2", "tile//000", "tile/entries/x000/000",
    ],
)
def test_malformed_paths_rejected(path: str) -> None:
    with pytest.raises(TilePathError):
        parse_tile_path(path)


@given(st.integers(min_value=-1, max_value=63), st.integers(min_value=0, max_value=2**40),
       st.integers(min_value=1, max_value=256))
def test_path_round_trip(level: int, index: int, width: int) -> None:
    t = Tile(level, index, width)
    assert parse_tile_path(t.path()) == t


@pytest.mark.parametrize(
    "path", ["tile/1\u0661/000", "tile/0/000.p/1\u0660", "tile/0/\u0660\u0660\u0660"]
)
def test_non_ascii_digits_rejected(path: str) -> None:
    with pytest.raises(TilePathError):
        parse_tile_path(path)


def test_tiles_between_is_what_the_new_size_adds() -> None:
    from ledger.core.tiles import tiles_between

    for old, new in [(0, 0), (0, 1), (5, 5), (255, 256), (256, 257), (300, 70000),
                     (0, 65536), (65535, 65537), (1000, 1000 * 256 + 3)]:
        added = set(tiles_between(old, new))
        assert added == set(tiles_for_size(new, entries=True)) - set(
            tiles_for_size(old, entries=True)), (old, new)
    with pytest.raises(ValueError):
        tiles_between(2, 1)


@pytest.mark.parametrize(("tile", "end"), [
    (Tile(ENTRIES_LEVEL, 0), 256), (Tile(ENTRIES_LEVEL, 2, 7), 519), (Tile(0, 1), 512),
    (Tile(0, 0, 1), 1), (Tile(1, 0, 1), 256), (Tile(1, 0), 65536), (Tile(1, 1, 2), 65536 + 512),
    (Tile(2, 0, 1), 65536)])
def test_entries_end_is_where_what_a_tile_covers_ends(tile: Tile, end: int) -> None:
    """tlog-tiles "Pruning": a tile may be denied once this is at most the minimum index."""
    assert tile.entries_end() == end
