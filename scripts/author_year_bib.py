"""Author-year labels for the bibliography (a local Sphinx extension).

The text cites author-year (``bibtex_reference_style: author_year``), but
pybtex ships only alphabetic (``[BCB15]``) and numeric bibliography labels.
This extension registers the pybtex formatting style ``author_year``:
pybtex's ``unsrt`` entries (with their DOI, arXiv and URL links), sorted
by author, year and title, and labelled ``[Vaswani et al., 2017]`` so
that the list reads like the citations that point into it. Labels that
would repeat get a letter after the year (2013a, 2013b).

``_config.yml`` loads it (``sphinx.local_extensions``) and selects it with
``bibtex_default_style: author_year``.

Textual citations use ``{cite:t}`` ("Cho et al. [2014]"), parenthetical
ones ``{cite:p}`` ("[Cho et al., 2014]").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle


def _last_names(entry: Any) -> list[str]:
    persons = entry.persons.get("author") or entry.persons.get("editor")
    if not persons:
        return [entry.fields.get("institution", entry.key)]
    names = []
    for person in persons:
        last = " ".join(person.prelast_names + person.last_names)
        names.append(last.replace("{", "").replace("}", ""))
    return names


def author_year(entry: Any) -> tuple[str, str]:
    """The author part ("Vaswani et al.") and the year of an entry."""
    names = _last_names(entry)
    if len(names) == 1:
        authors = names[0]
    elif len(names) == 2:
        authors = f"{names[0]} and {names[1]}"
    else:
        authors = f"{names[0]} et al."
    return authors, entry.fields.get("year", "n.d.")


class AuthorYearLabelStyle(BaseLabelStyle):
    """Labels ``Author et al., 2017``, with a letter where two coincide."""

    def format_labels(self, sorted_entries: Iterable[Any]) -> Iterator[str]:
        parts = [author_year(entry) for entry in sorted_entries]
        count = Counter(parts)
        seen: Counter[tuple[str, str]] = Counter()
        for authors, year in parts:
            suffix = ""
            if count[(authors, year)] > 1:
                suffix = "abcdefghijklmnopqrstuvwxyz"[seen[(authors, year)]]
                seen[(authors, year)] += 1
            yield f"{authors}, {year}{suffix}"


class AuthorYearStyle(UnsrtStyle):
    """pybtex's ``unsrt`` entries, sorted and labelled author-year."""

    default_sorting_style = "author_year_title"
    default_label_style = "author_year"


def setup(app: Any) -> dict[str, Any]:
    register_plugin("pybtex.style.labels", "author_year", AuthorYearLabelStyle)
    register_plugin("pybtex.style.formatting", "author_year", AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
