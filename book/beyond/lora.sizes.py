# Sizes of lora.md, read by transformer_book._book.sizes and by
# benchmarks/lora.py, which runs the page's fine-tuning grid (every rank
# and full fine-tuning, three seeds) into data/lora.csv with these sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

threads = 1

cpu = {
    "d_model": 96,  # the pre-trained character GPT
    "num_heads": 4,
    "num_layers": 2,
    "block_size": 64,
    "batch_size": 16,
    "pretrain_steps": 500,  # on Tiny Shakespeare
    "pretrain_lr": 3e-3,
    "finetune_steps": 150,  # on the Python documentation
    "lora_lr": 1e-2,  # the best of 3e-3, 1e-2, 3e-2 at rank 4
    "full_lr": 3e-3,  # the best of 1e-3, 3e-3, 1e-2
    "alpha": 8,  # the same for every rank, as Hu et al. do
    "eval_windows": 256,  # validation windows of each text
}

gpu = {
    "d_model": 256,
    "num_heads": 8,
    "num_layers": 4,
    "block_size": 128,
    "batch_size": 32,
    "pretrain_steps": 2000,
    "pretrain_lr": 2e-3,
    "finetune_steps": 500,
    "lora_lr": 1e-2,
    "full_lr": 2e-3,
    "alpha": 8,
    "eval_windows": None,
}

smoke = {
    "d_model": 32,
    "num_layers": 1,
    "block_size": 16,
    "batch_size": 4,
    "pretrain_steps": 3,
    "finetune_steps": 2,
    "eval_windows": 4,
}
