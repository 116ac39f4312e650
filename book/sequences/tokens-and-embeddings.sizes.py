# Sizes of tokens-and-embeddings.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# Word2vec's batches are tiny for a GPU: it trains on the CPU either way,
# with one thread, which is fastest for such small matrices.
threads = 1

cpu = {
    "bpe_vocab": 1024,
    "char_orders": (1, 2, 3, 4, 5),
    "w2v_dim": 64,
    "sg_epochs": 2,
    "cbow_epochs": 12,
}

gpu = {
    "bpe_vocab": 4096,
    "char_orders": (1, 2, 3, 4, 5, 6, 7),
    "w2v_dim": 100,
    "sg_epochs": 10,
    "cbow_epochs": 40,
}

smoke = {
    "bpe_vocab": 300,
    "char_orders": (1, 2, 3),
    "sg_epochs": 1,
    "cbow_epochs": 1,
}
