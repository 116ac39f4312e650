# Sizes of translation.md, read by transformer_book._book.sizes.
# The transformer and its data are recipes.get("translation", preset).
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# Small models: on a CPU, one thread is faster than several.
threads = 1

cpu = {
    # Part I's task: numbers 0..999, lists of 1 to 4, 2,000 test lists.
    "test_lists": 2000,
    "part1_steps": 400,
    "part1_batch": 128,
    "steps": 1200,
    "batch": 16,
    "warmup": 60,
    "rnn_embed": 32,
    "rnn_hidden": 64,
    "beam_lists": 100,
    "m30k_steps": 0,
    "m30k_warmup": 0,
    "m30k_test": 0,
    "m30k_batch": 128,
}

gpu = {
    "test_lists": 5000,
    "part1_steps": 1500,
    "part1_batch": 256,
    "steps": 1125,
    "batch": 256,
    "warmup": 200,
    "rnn_embed": 64,
    "rnn_hidden": 128,
    "beam_lists": 1000,
    "m30k_steps": 4000,
    "m30k_warmup": 400,
    "m30k_test": 1000,
    "m30k_batch": 128,
}

smoke = {
    "part1_steps": 1,
    "part1_batch": 128,
    "steps": 2,
    "batch": 8,
    "warmup": 1,
    "test_lists": 2,
    "beam_lists": 1,
    "m30k_steps": 1,
    "m30k_warmup": 0,
    "m30k_test": 2,
    "m30k_batch": 8,
}
