# Sizes of encoder-decoder.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# The models here are small: on a CPU, splitting each tiny matrix product
# across threads costs more than it saves.
threads = 1

cpu = {
    # Numbers 0..999 in lists of 1 to 4; a GRU of width 64.
    "stop": 1000,
    "max_numbers": 4,
    "steps": 400,
    "batch": 128,
    "embed_size": 32,
    "hidden_size": 64,
    "test_lists": 2000,
}

gpu = {
    "stop": 10000,
    "max_numbers": 4,
    "steps": 1500,
    "batch": 256,
    "embed_size": 64,
    "hidden_size": 128,
    "test_lists": 5000,
}

smoke = {
    "steps": 3,
    "batch": 16,
    "test_lists": 50,
}
