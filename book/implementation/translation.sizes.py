# Sizes of translation.md, read by transformer_book._book.sizes.
# The transformer and its data are recipes.get("translation", preset).
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# Small models: on a CPU, one thread is faster than several.
threads = 1

cpu = {
    # A harder task than Part I's (the recipe's stop and max_numbers):
    # numbers 0..9,999, lists of 1 to 6; each model trained from 3 seeds.
    # 300 steps leave both models far from done, the transformer ahead.
    "seeds": 3,
    "lists": 4800,
    "test_lists": 1000,
    "steps": 300,
    "batch": 16,
    "warmup": 60,
    "rnn_embed": 32,
    "rnn_hidden": 64,
    "beam_lists": 50,
    "m30k_steps": 0,
    "m30k_warmup": 0,
    "m30k_test": 0,
    "m30k_batch": 128,
}

gpu = {
    "seeds": 3,
    "lists": 384000,
    "test_lists": 5000,
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
    "seeds": 2,
    "lists": 64,
    "test_lists": 20,
    "steps": 2,
    "batch": 8,
    "warmup": 1,
    "beam_lists": 2,
    "m30k_steps": 1,
    "m30k_warmup": 0,
    "m30k_test": 2,
    "m30k_batch": 8,
}
