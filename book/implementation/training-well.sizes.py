# Sizes of training-well.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# One thread, as the book build runs its pages; the throughput sections
# report the thread count with their numbers.
threads = 1

cpu = {
    # A one-block GPT of about 20,000 parameters; one run of 200 steps
    # takes about two seconds on one CPU thread.
    "d_model": 32,
    "num_heads": 4,
    "num_layers": 1,
    "seq_len": 32,
    "batch_size": 16,
    "steps": 200,
    "warmup": 20,
    "base_lr": 0.01,
    "lrs": (0.001, 0.003, 0.01, 0.03, 0.1),
    "eval_every": 20,
    "matmul_sizes": (32, 64, 128, 256),
    "batch_sizes": (1, 4, 16, 64),
    "throughput_steps": 6,
    "valid_windows": 64,  # None: every window
    "resume_steps": (40, 20),
    "resume_warmup": 5,
    # Dropout: a slice small enough to memorise, read about 60 times.
    "dropout_chars": 2000,
    "dropout_steps": 250,
    "dropout_eval_every": 25,
    "dropout": 0.2,
}

gpu = {
    "d_model": 128,
    "num_heads": 4,
    "num_layers": 4,
    "seq_len": 128,
    "batch_size": 64,
    "steps": 1000,
    "warmup": 100,
    "base_lr": 0.003,
    "lrs": (0.0003, 0.001, 0.003, 0.01, 0.03),
    "eval_every": 100,
    "matmul_sizes": (256, 512, 1024, 2048, 4096),
    "batch_sizes": (4, 16, 64, 256),
    "throughput_steps": 20,
    "valid_windows": 64,  # None: every window
    "resume_steps": (40, 20),
    "resume_warmup": 5,
    "dropout_chars": 20000,
    "dropout_steps": 1000,
    "dropout_eval_every": 50,
    "dropout": 0.2,
}

smoke = {
    "steps": 2,
    "warmup": 1,
    "eval_every": 2,
    "lrs": (0.003,),
    "matmul_sizes": (256,),
    "batch_size": 4,
    "batch_sizes": (4,),
    "throughput_steps": 2,
    "valid_windows": 4,
    "resume_steps": (2, 1),
    "resume_warmup": 1,
    "dropout_steps": 2,
    "dropout_eval_every": 2,
}
