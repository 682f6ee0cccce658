"""Text sources, below tokenization and the data pipeline (both read them): local or gs:// text
files, tfds datasets and the embedded docstring corpus (`sources`, `embedded`)."""
