# Sizes of encoder-decoder.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# Every model on this page is small: splitting its matrix products
# across threads costs more than it saves.
threads = 1

cpu = {
    "gen_steps": 24,
    "d_model": 64,
    "layers": 2,
}

gpu = {
    "gen_steps": 64,
    "d_model": 256,
    "layers": 4,
}

smoke = {
    "gen_steps": 4,
}
