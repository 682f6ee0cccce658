"""Whole runs built from a config, the layer above the trainer, the AOT fit check, the tasks and
the architectures they combine:

- pretrain: `run_pretraining` (encoder objectives; the encoder-decoders' is
  `bert_jax.arch.seq2seq.pretrain_run`), with its init checkpoint, TPU memory check and Hugging
  Face export;
- finetune: `finetune` (load, featurise, train, score; sweeps and seeds; the run's config, mesh
  and files: `bert_jax.tasks.finetune_setup`; the encoder-decoders' text-to-text run:
  `bert_jax.arch.seq2seq.text_to_text`);
- export: a workdir -> a Hugging Face directory; features: extract-features and attention-map;
  demo_workdir: the demo's run."""
