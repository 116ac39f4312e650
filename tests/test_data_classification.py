"""data.python_docs_sentences: sentences of the docs labelled by chapter."""

from __future__ import annotations

from pydoc_data.topics import topics

import pytest

from transformer_book import data


@pytest.fixture(scope="module")
def labelled():
    return data.python_docs_sentences()


def test_every_help_topic_belongs_to_exactly_one_chapter():
    mapped = [t for ts in data.PYTHON_DOCS_CHAPTERS.values() for t in ts]
    assert len(mapped) == len(set(mapped))
    assert set(mapped) == set(topics)


def test_sentences_are_unique_labelled_and_deterministic(labelled):
    sentences, labels, chapters = labelled
    assert chapters == tuple(data.PYTHON_DOCS_CHAPTERS)
    assert len(sentences) == len(labels) > 1500
    assert len(set(sentences)) == len(sentences)
    assert set(labels) == set(range(len(chapters)))
    assert data.python_docs_sentences() == labelled


def test_each_sentence_is_prose_from_its_chapter(labelled):
    sentences, labels, chapters = labelled
    flat = {
        chapter: " ".join(
            " ".join(topics[t].split())
            for t in data.PYTHON_DOCS_CHAPTERS[chapter]
        )
        for chapter in chapters
    }
    for sentence, label in zip(sentences[::7], labels[::7], strict=True):
        assert sentence in flat[chapters[label]]
        assert 6 <= len(sentence.split()) <= 40
        assert sentence.endswith(".")
        assert ">>>" not in sentence and "::=" not in sentence
        # Dropped when two chapters share it, so no other chapter has it.
        others = [c for c in chapters if c != chapters[label]]
        assert not any(sentence in flat[c] for c in others)


def test_known_sentence_gets_its_chapter(labelled):
    sentences, labels, chapters = labelled
    by_start = {
        "The current code generator emits no code for an assert": (
            "statements"
        ),
        'The module "pdb" defines an interactive source code': (
            "standard library"
        ),
    }
    for start, chapter in by_start.items():
        (found,) = [i for i, x in enumerate(sentences) if x.startswith(start)]
        assert chapters[labels[found]] == chapter


def test_word_limits_filter_and_are_checked():
    short, _, _ = data.python_docs_sentences(min_words=6, max_words=10)
    assert short and all(6 <= len(s.split()) <= 10 for s in short)
    with pytest.raises(ValueError, match="max_words"):
        data.python_docs_sentences(min_words=10, max_words=5)
    with pytest.raises(ValueError, match="min_words"):
        data.python_docs_sentences(min_words=0)
    with pytest.raises(TypeError, match="max_words"):
        data.python_docs_sentences(max_words=2.5)
