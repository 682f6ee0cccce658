"""Pretraining shards on disk: TFRecord files (`tfrecord`) of `tf.train.Example` records
(`example`) with a fixed feature list (`schema`). No TensorFlow, JAX or Grain: the data pipeline
and Beam workers import this without the accelerator stack."""
