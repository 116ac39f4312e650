# Sizes of flash-attention.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

threads = 1

cpu = {
    "head_dim": 64,
    "block_size": 64,  # the tiled loop's block in the memory sweep
    "lengths": (256, 512, 1024, 2048, 4096),  # the memory sweep
    "flop_lengths": (256, 512, 1024, 2048, 4096, 8192, 16384),
    "window": 256,  # sliding-window attention's keys per query
    "flop_block": 64,  # the block of a kernel that skips masked blocks
}

gpu = {
    "head_dim": 64,
    "block_size": 256,
    "lengths": (1024, 2048, 4096, 8192, 16384),
    "flop_lengths": (1024, 2048, 4096, 8192, 16384, 32768, 65536),
    "window": 1024,
    "flop_block": 128,
}

smoke = {
    "block_size": 64,
    "lengths": (128, 256, 512),
    "flop_lengths": (1024, 2048, 4096),
}
