"""Whole runs built from a config, the layer above the trainer, the AOT fit check, the tasks and
the interop they combine:

- pretrain: `run_pretraining` (encoder objectives; seq2seq_pretrain for T5's), with its init
  checkpoint, TPU memory check and Hugging Face export;
- finetune: `finetune` (load, featurise, train, score; sweeps and seeds), with finetune_setup
  (the run's config, mesh and output files) and text_to_text (the encoder-decoder fine-tuning);
- export: a workdir -> a Hugging Face directory; demo_workdir: the demo's run."""
