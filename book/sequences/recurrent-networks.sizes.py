# Sizes of recurrent-networks.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

cpu = {
    "grad_steps": 60,
    "grad_batch": 32,
    "hidden": 64,
}

gpu = {
    "grad_steps": 200,
    "grad_batch": 256,
    "hidden": 256,
}

smoke = {
    "grad_steps": 20,
    "grad_batch": 8,
}
