# Sizes of gpt.md, read by transformer_book._book.sizes.
# The model and its training recipe are recipes.get("gpt", preset).
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

threads = 1

cpu = {
    # Tiny Shakespeare, a three-layer model (benchmarks/gpt_char.py's
    # "book" recipe).
    "dataset": "Tiny Shakespeare",
    "prompt": "ROMEO:\n",
    "batch_size": 12,
    "steps": 1250,
    "eval_every": 250,
    "snapshots": (100, 400, 1250),  # the samples' steps; the last: steps
    "long_context": 1024,
    "cache_positions": (16, 32, 64, 128, 256, 512, 1023),
    "valid_windows": None,  # None: every window
    "sample_chars": 200,
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
    "snapshots": (100, 500, 2000),
    "long_context": 1024,
    "cache_positions": (16, 32, 64, 128, 256, 512, 1023),
    "valid_windows": None,  # None: every window
    "sample_chars": 200,
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
    "snapshots": (1,),
    "long_context": 16,
    "cache_positions": (2, 4),
    "valid_windows": 1,
    "sample_chars": 8,
    "restored_chars": 8,
    "strategy_chars": 8,
    "cache_check_tokens": 8,
    "heads_shown": 2,
    "ablation_chars": 8,
}
