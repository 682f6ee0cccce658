"""Test helpers: a ModernBERT-style tokenizer.json (byte-level BPE with BERT's special tokens, as
ModernBERT's release) trained by `tokenizers` on real English text, and a tiny random Hugging
Face ModernBERT directory written by transformers with that tokenizer."""

from __future__ import annotations

import pathlib

from bert_jax.corpus import embedded

SPECIALS = ("[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]")


def train_tokenizer_json(out_dir: pathlib.Path, vocab_size: int = 1000, docs: int = 300):
    """A transformers PreTrainedTokenizerFast saved in `out_dir` (tokenizer.json and its
    config), trained on `docs` documents of the embedded corpus."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    texts = [" ".join(doc) for doc in embedded.iter_documents(max_documents=docs)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    ids = {t: tok.token_to_id(t) for t in SPECIALS}
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
    )
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
        model_input_names=["input_ids", "attention_mask"],
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out_dir)
    return fast


def hf_config(fast, **sizes):
    """A tiny transformers ModernBertConfig for the tokenizer `fast`; local windows shorter than
    the test sequences so that both kinds of layer matter."""
    import transformers

    kw = dict(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=2,
        local_attention=8,
        global_attn_every_n_layers=3,
        max_position_embeddings=128,
        pad_token_id=fast.pad_token_id,
        cls_token_id=fast.cls_token_id,
        sep_token_id=fast.sep_token_id,
        bos_token_id=fast.cls_token_id,
        eos_token_id=fast.sep_token_id,
    )
    kw.update(sizes)
    return transformers.ModernBertConfig(**kw)


def write_hf_dir(path: pathlib.Path, fast, architecture: str = "ModernBertForMaskedLM", **sizes):
    """A random transformers ModernBERT of `architecture` plus the tokenizer, saved in `path`."""
    import torch
    import transformers

    torch.manual_seed(0)
    model = getattr(transformers, architecture)(hf_config(fast, **sizes))
    model.save_pretrained(path)
    fast.save_pretrained(path)
    return path
