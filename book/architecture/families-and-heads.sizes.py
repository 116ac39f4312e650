# Sizes of families-and-heads.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# The models here are small: splitting their matrix products across
# threads costs more than it saves.
threads = 1

cpu = {
    "d_model": 64,
    "num_layers": 2,
    "mlm_tokens": 200000,
}

gpu = {
    "d_model": 256,
    "num_layers": 4,
    "mlm_tokens": 2000000,
}

smoke = {
    "mlm_tokens": 20000,
}
