"""ELMo: the two LSTM language models over words (`model`), trained as a task of the shared loop
(`lm`), and their features for CoNLL tagging (`ner`)."""
