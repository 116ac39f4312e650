# Sizes of gpt.md, read by transformer_book._book.sizes.
# The model and its training recipe are recipes.get("gpt", preset).
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

cpu = {
    # The Python documentation embedded in CPython, a two-layer model.
    "dataset": "the Python documentation",
    "prompt": "The value ",
    "batch_size": 32,
    "steps": 500,
    "eval_every": 100,
    "long_context": 192,
    "cache_lengths": (24, 48, 96, 191),
    "valid_windows": None,  # None: every window
    "sample_chars": 60,
    "restored_chars": 80,
    "strategy_chars": 150,
    "cache_check_tokens": None,  # None: block_size - 1
    "heads_shown": None,  # None: every head
    "ablation_chars": None,  # None: whole windows
}

gpu = {
    # Tiny Shakespeare and a six-layer model on a GPU.
    "dataset": "Tiny Shakespeare",
    "prompt": "ROMEO:\n",
    "batch_size": 64,
    "steps": 2000,
    "eval_every": 250,
    "long_context": 1024,
    "cache_lengths": (64, 128, 256, 512, 1023),
    "valid_windows": None,  # None: every window
    "sample_chars": 60,
    "restored_chars": 80,
    "strategy_chars": 150,
    "cache_check_tokens": None,  # None: block_size - 1
    "heads_shown": None,  # None: every head
    "ablation_chars": None,  # None: whole windows
}

smoke = {
    "steps": 1,
    "eval_every": 1,
    "batch_size": 1,
    "cache_lengths": (2, 4),
    "valid_windows": 1,
    "sample_chars": 8,
    "restored_chars": 8,
    "strategy_chars": 8,
    "cache_check_tokens": 8,
    "heads_shown": 2,
    "ablation_chars": 8,
}
