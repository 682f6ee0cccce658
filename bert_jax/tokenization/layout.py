"""How a tokenizer's special tokens frame one text or a pair for fine-tuning.

    BERT (WordPiece, sentencepiece):  [CLS] A [SEP]        [CLS] A [SEP] B [SEP]   types 0.. 1..
    RoBERTa (byte-level BPE):         <s> A </s>           <s> A </s></s> B </s>   types all 0
    ModernBERT (byte-level BPE):      [CLS] A [SEP]        [CLS] A [SEP] B [SEP]   types all 0
    XLNet (sentencepiece):            <cls> A <sep>        <cls> A <sep> B <sep>   types 0.. 1..

XLNet's own order puts <cls> last and pads on the left; the featurizers write the first form and
`bert_jax.arch.xlnet.layout` moves each row into XLNet's.

Each tokenizer carries its layout as `tokenizer.layout`; `layout_of` gives BERT's to tokenizers
without one, so the tasks build sequences from the tokenizer instead of literal "[CLS]"/"[SEP]".
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class SpecialLayout:
    cls: str  # first token of every sequence
    sep: str  # after the last text
    pair_sep: tuple[str, ...]  # between A and B
    unk: str  # stands for a word with no pieces (NER keeps one piece per word)
    pad: str | None  # the padding token; None: id 0, as google-research/bert pads
    segment_b: int  # token type id of B (and its closing sep)
    word_prefix: str  # prepended to a lone word (NER, SQuAD words) before tokenizing

    def pair_overhead(self) -> int:
        """Special tokens in a pair sequence."""
        return 2 + len(self.pair_sep)

    def pad_id(self, vocab: dict[str, int]) -> int:
        return 0 if self.pad is None else vocab[self.pad]


BERT = SpecialLayout("[CLS]", "[SEP]", ("[SEP]",), "[UNK]", None, 1, "")
# RobertaTokenizer(Fast) with add_prefix_space for words split beforehand, as transformers'
# token-classification and SQuAD scripts do for RoBERTa.
ROBERTA = SpecialLayout("<s>", "</s>", ("</s>", "</s>"), "<unk>", "<pad>", 0, " ")
# ModernBERT: byte-level BPE with BERT's [CLS]/[SEP] and no token types (all 0).
MODERNBERT = SpecialLayout("[CLS]", "[SEP]", ("[SEP]",), "[UNK]", "[PAD]", 0, " ")

XLNET = SpecialLayout("<cls>", "<sep>", ("<sep>",), "<unk>", "<pad>", 1, "")
XLNET_CLS_SEGMENT = 2  # XLNetTokenizer's token type of <cls>
XLNET_PAD_SEGMENT = 3  # XLNetTokenizer's pad_token_type_id


def layout_of(tokenizer: object) -> SpecialLayout:
    return getattr(tokenizer, "layout", BERT)
