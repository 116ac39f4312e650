"""data.number_lists: lists of numbers in words, drawn from one split."""

from __future__ import annotations

import random

import pytest

from transformer_book import data

PAIRS = [("one", "un"), ("two", "deux"), ("three", "trois")]


def test_lists_join_pairs_on_both_sides_in_the_same_order():
    lists = data.number_lists(PAIRS, 200, max_numbers=4, rng=0)
    assert len(lists) == 200
    lookup = dict(PAIRS)
    lengths = set()
    for src, tgt in lists:
        words = src.split(" ; ")
        assert tgt.split(" ; ") == [lookup[w] for w in words]
        lengths.add(len(words))
    assert lengths == {1, 2, 3, 4}


def test_a_shared_generator_continues_its_sequence():
    # The page's recipe: training lists first, test lists from the same rng.
    rng = random.Random(0)
    first = data.number_lists(PAIRS, 5, rng=rng)
    second = data.number_lists(PAIRS, 5, rng=rng)
    both = data.number_lists(PAIRS, 10, rng=random.Random(0))
    assert first + second == both
    assert data.number_lists(PAIRS, 10, rng=0) == both


def test_the_encoder_decoder_recipe():
    """The same draws as the number_lists function of Part I's page."""
    def page_lists(split, count, rng, max_numbers=4):
        lists = []
        for _ in range(count):
            k = rng.randint(1, max_numbers)
            chosen = [split[rng.randrange(len(split))] for _ in range(k)]
            lists.append((" ; ".join(en for en, _ in chosen),
                          " ; ".join(fr for _, fr in chosen)))
        return lists

    pairs = data.number_pairs("en", "fr", start=0, stop=100,
                              valid_fraction=0.0, test_fraction=0.1)
    ours = random.Random(0)
    theirs = random.Random(0)
    assert data.number_lists(pairs.train, 50, rng=ours) == page_lists(
        pairs.train, 50, theirs)
    assert data.number_lists(pairs.test, 20, rng=ours) == page_lists(
        pairs.test, 20, theirs)
    test_words = {en for en, _ in pairs.test}
    train_words = {en for en, _ in pairs.train}
    for src, _ in data.number_lists(pairs.test, 20, rng=1):
        assert set(src.split(" ; ")) <= test_words - train_words


def test_custom_separator_and_zero_count():
    lists = data.number_lists(PAIRS, 3, max_numbers=2, separator=", ",
                              rng=3)
    assert all(", " in s or s in dict(PAIRS) for s, _ in lists)
    assert data.number_lists(PAIRS, 0) == []


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "name"),
    [
        ((PAIRS, -1), {}, ValueError, "count"),
        ((PAIRS, 2), {"max_numbers": 0}, ValueError, "max_numbers"),
        ((PAIRS, 2), {"rng": "seed"}, TypeError, "rng"),
        ((PAIRS, 2), {"separator": 1}, TypeError, "separator"),
        (([], 2), {}, ValueError, "pairs"),
    ],
)
def test_bad_arguments_are_named(args, kwargs, error, name):
    with pytest.raises(error, match=name):
        data.number_lists(*args, **kwargs)
