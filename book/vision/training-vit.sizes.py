# Sizes of training-vit.md, read by transformer_book._book.sizes.
# The ViT and its training recipe are recipes.get("vit", preset).
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

cpu = {
    # 4,000 digits of MNIST 5k; every run takes the same number of steps.
    "dataset": "MNIST 5k",
    "steps": 960,
    "batch_size": 32,
    "cnn_channels": (16, 32, 64),
    "cnn_hidden": 128,
    "train_sizes": (500, 1000, 2000, 4000),
    "patch_sizes": (7, 14),
    "test_images": None,  # None: all of them
}

gpu = {
    # Fashion-MNIST's 60,000 images on a GPU.
    "dataset": "Fashion-MNIST",
    "steps": 4000,
    "batch_size": 256,
    "cnn_channels": (32, 64, 128),
    "cnn_hidden": 600,
    "train_sizes": (500, 1000, 2000, 4000, 15000, 60000),
    "patch_sizes": (4, 7, 14),
    "test_images": None,  # None: all of them
}

smoke = {
    "steps": 10,
    "batch_size": 8,
    "train_sizes": (500, 60000),
    "test_images": 50,
}
