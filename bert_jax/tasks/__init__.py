"""Fine-tuning tasks: GLUE, SQuAD v1.1/v2.0, CoNLL-2003 NER, SWAG, and their official metrics.

    bert_jax.runs.finetune.finetune(cfg, workdir)     # what `bert-jax finetune` runs

Modules: glue, squad (+ squad_predict, squad_eval), ner, swag read their standard file formats,
featurise into fixed-length numpy arrays and score with the benchmark's own metric; text_pairs
is their shared `[CLS] A [SEP] B [SEP]` featurisation; jobs adapts each family to the runner;
train_tasks holds the training Tasks (classification, tagging, span) and feature_ner the paper's
feature-based NER; arrays turns in-memory arrays into training/eval batches. The run itself
(train with the shared loop, evaluate with `trainer.predict_step`) is `bert_jax.runs.finetune`.
"""
