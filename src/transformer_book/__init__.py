"""transformer_book: the tested package behind the transformers book."""

__version__ = "0.1.0"
