"""transformer_book: the tested package behind the transformers book."""

#: The package's version, in this one place: ``pyproject.toml`` reads it
#: (``[tool.setuptools.dynamic]``) and ``CHANGELOG.md`` has an entry for it.
__version__ = "0.2.0"
