"""Task-level distillation (Turc et al. 2019, "Well-Read Students Learn Better"): a fine-tuned
teacher labels the task's inputs and unlabeled transfer text (`labelling`, the `distill-data`
command), and a student is fine-tuned on the teacher's outputs (`student`, the `distill` block of
a fine-tuning config), from the cache or with the frozen teacher in the same step (online)."""
