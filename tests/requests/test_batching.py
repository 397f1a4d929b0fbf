"""Batching: longest first, grouped by parameters, original order restored, shards."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from assay.requests.batching import batches, shard, sorted_groups, split_padding


def test_sorted_groups_longest_first_ties_in_original_order():
    items = ["aa", "b", "cccc", "dd", "e"]
    assert sorted_groups(items, len) == [[2, 0, 3, 1, 4]]


def test_groups_never_mix_and_come_in_order_of_first_member():
    items = [("x", 1), ("yyy", 2), ("zz", 1), ("w", 2)]
    groups = sorted_groups(items, lambda t: len(t[0]), group=lambda t: t[1])
    assert groups == [[2, 0], [1, 3]]


def test_batches_respect_size_and_groups():
    items = [("a" * n, n % 2) for n in range(1, 8)]
    out = list(batches(items, lambda t: len(t[0]), 2, group=lambda t: t[1]))
    for batch in out:
        assert len(batch.items) <= 2
        assert len({g for _, g in batch.items}) == 1
        assert batch.items == tuple(items[i] for i in batch.indices)
    assert sorted(i for b in out for i in b.indices) == list(range(7))
    # The first batch holds the longest items of the first group.
    assert [len(t[0]) for t in out[0].items] == [7, 5]


def test_callable_batch_size_gets_the_longest_length_of_the_batch():
    seen = []

    def size(longest: int) -> int:
        seen.append(longest)
        return 1 if longest > 3 else 10

    out = list(batches(["aaaaa", "bb", "cccc", "d"], len, size))
    assert [len(b.items) for b in out] == [1, 1, 2]
    assert seen == [5, 4, 2]


@given(st.integers(0, 200), st.integers(1, 9))
def test_shards_partition_the_items_contiguously_and_evenly(n, world):
    parts = [shard(n, r, world) for r in range(world)]
    assert [i for p in parts for i in p] == list(range(n))
    assert max(len(p) for p in parts) - min(len(p) for p in parts) <= 1


def test_split_padding_keeps_close_lengths_together():
    assert split_padding([100, 98, 97, 95], overhead=32) == [4]


def test_split_padding_runs_a_long_row_apart_from_short_ones():
    # Whole: 4 x 300 = 1200 padded tokens; apart: 300 + 32 + 3 x 50 = 482.
    assert split_padding([300, 50, 50, 50], overhead=32) == [1, 3]


@given(st.lists(st.integers(1, 400), min_size=1, max_size=12), st.integers(0, 100))
def test_split_padding_is_no_worse_than_any_two_way_split(raw, overhead):
    lengths = sorted(raw, reverse=True)
    sizes = split_padding(lengths, overhead)
    assert sum(sizes) == len(lengths) and all(s > 0 for s in sizes)

    def cost(parts: list[int]) -> int:
        total, start = 0, 0
        for size in parts:
            total += size * lengths[start] + overhead
            start += size
        return total

    # Every split into one or two parts, counted independently of the dynamic programme.
    candidates = [[len(lengths)]] + [[k, len(lengths) - k] for k in range(1, len(lengths))]
    assert cost(sizes) <= min(cost(c) for c in candidates)
