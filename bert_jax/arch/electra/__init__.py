"""ELECTRA: the generator and discriminator trained as one module (`model`) over the BERT
encoder; its discriminator is a BERT variant (`bert_jax.arch.bert.variants.electra`)."""
