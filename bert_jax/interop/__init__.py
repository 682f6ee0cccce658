"""Checkpoint plumbing every architecture shares: building a parameter tree from named arrays
(`assemble`) and reading any bert-jax workdir's parameters (`workdir_params`). Each
architecture's own formats (Hugging Face, Google TF, T5/XLNet) live in `bert_jax/arch/<name>/`."""
