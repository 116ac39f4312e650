# Sizes of moe.md, read by transformer_book._book.sizes.
# The comparison over seeds is benchmarks/moe.py's CSV, data/moe.csv
# (cpu sizes); the page reruns its MoE run of seed 0.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

threads = 1

cpu = {
    "d_model": 64,
    "num_heads": 4,
    "num_layers": 2,
    "d_ff": 128,  # of each expert; the dense models: top_k and
    "num_experts": 8,  # num_experts times as wide
    "top_k": 2,
    "steps": 600,
    "batch_size": 12,  # the GPT recipe's
    "block_size": 64,
    "warmup": 30,
    "eval_windows": 256,  # validation windows scored
    "eval_every": 50,  # steps between two scorings
    "unbalanced_steps": 200,  # the exercise's run without balancing
}

gpu = {
    "d_model": 128,
    "num_heads": 4,
    "num_layers": 4,
    "d_ff": 256,
    "num_experts": 8,
    "top_k": 2,
    "steps": 2000,
    "batch_size": 64,
    "block_size": 256,
    "warmup": 100,
    "eval_windows": 512,
    "eval_every": 100,
    "unbalanced_steps": 500,
}

smoke = {
    "steps": 4,
    "batch_size": 2,
    "block_size": 32,
    "warmup": 1,
    "eval_windows": 4,
    "eval_every": 2,
    "unbalanced_steps": 2,
}
