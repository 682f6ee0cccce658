"""Text sources, below tokenization and the data pipeline (both read them): local or gs:// text
files, tfds datasets, the embedded docstring corpus and a fixed 2 MB snapshot of it shipped with
the package (`sources`, `embedded`, `snapshot`)."""
