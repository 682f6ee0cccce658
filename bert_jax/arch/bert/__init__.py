"""The BERT encoder and its variants (`variants/`: BERT, RoBERTa, ALBERT, DistilBERT, ELECTRA's
discriminator), its heads, the +BiLSTM and left-to-right decoding of the ablations, and its
checkpoint formats: Hugging Face directories (`hf`, `hf_configs`, `task_heads`), Google's TF
checkpoints (`tf_ckpt`, `tf_variants`), one weight-name table (`names`, `assemble`) and one loader
for all of them (`pretrained`)."""
