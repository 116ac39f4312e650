"""Docstring sections that several public objects share, written once.

Sibling classes (the three recurrent layers, the two word2vec models) take
the same arguments and return the same shapes. Their docstrings hold a
placeholder line such as ``{layer_args}``; :func:`shared_doc` replaces it
with the section, indented like the placeholder, so that ``help()``,
doctest and the API pages see the full text while the source says it once.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")


def shared_doc(**sections: str) -> Callable[[_T], _T]:
    """Replace each placeholder line ``{name}`` with ``sections[name]``.

    Args:
        **sections: the shared text of each placeholder, dedented.

    Returns:
        A decorator that fills in the object's ``__doc__``.

    Raises:
        ValueError: if the docstring lacks a placeholder (a typo would
            otherwise leave the section out silently).

    Example:
        >>> @shared_doc(args="Args:\\n    x: a number.")
        ... def f(x):
        ...     '''Return x.
        ...
        ...     {args}
        ...     '''
        >>> print(f.__doc__.splitlines()[2:4])
        ['    Args:', '        x: a number.']
    """

    def fill(obj: _T) -> _T:
        doc = obj.__doc__ or ""
        for name, text in sections.items():
            lines = doc.split("\n")
            marker = "{" + name + "}"
            places = [i for i, x in enumerate(lines) if x.strip() == marker]
            if not places:
                raise ValueError(f"{obj!r} has no {marker} line")
            for i in places:
                indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
                lines[i] = textwrap.indent(text.strip("\n"), indent)
            doc = "\n".join(lines)
        obj.__doc__ = doc
        return obj

    return fill
