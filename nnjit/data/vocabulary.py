"""``Vocabulary``: the token <-> id map of text data, built from strings.

``Vocabulary.build(texts, min_freq=2, max_size=10_000)`` counts the tokens of ``texts`` (split
by ``tokenizer``, whitespace by default) and numbers them by frequency, most frequent first
(ties in alphabetical order, as torchtext's ``build_vocab_from_iterator``). Two ids are
reserved, as in Keras' ``TextVectorization``: 0 is the padding token, 1 the unknown token that
every token outside the vocabulary maps to. ``vocab.encode(text)`` gives the ids of a text,
``vocab.decode(ids)`` the tokens back. ``Vocabulary(tokens)`` rebuilds a vocabulary from its
``tokens`` list (saved as JSON, for example), ids in list order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

import numpy as np

from nnjit.checks import Int

__all__ = ["Vocabulary"]

PAD_ID = 0
UNK_ID = 1


class Vocabulary:
    """Token ids: ``0`` the padding token, ``1`` the unknown token, then the known tokens.

    Args:
        tokens: every token in id order, the padding and unknown tokens first (what
            :attr:`tokens` gives), or just the known tokens (then the two special tokens are
            put in front). Tokens are strings, each listed once.
        pad_token, unk_token: the names of ids 0 and 1 (``"<pad>"``, ``"<unk>"``).
        tokenizer: splits a text into tokens (default ``str.split``: on whitespace).

    Attributes:
        tokens: the tokens in id order (``tokens[i]`` is id ``i``).
        pad_id, unk_id: 0 and 1.
    """

    pad_id = PAD_ID
    unk_id = UNK_ID

    def __init__(self, tokens: Iterable[str], *, pad_token: str = "<pad>",
                 unk_token: str = "<unk>", tokenizer: Callable[[str], list[str]] | None = None):
        tokens = list(tokens)
        for name, value in (("pad_token", pad_token), ("unk_token", unk_token)):
            if not isinstance(value, str):
                raise TypeError(f"Vocabulary: {name} must be a string, got "
                                f"{type(value).__name__}")
        if pad_token == unk_token:
            raise ValueError(f"Vocabulary: pad_token and unk_token are both {pad_token!r}")
        if tokens[:2] != [pad_token, unk_token]:
            tokens = [pad_token, unk_token, *tokens]
        index: dict[str, int] = {}
        for i, token in enumerate(tokens):
            if not isinstance(token, str):
                raise TypeError(f"Vocabulary: tokens[{i}] must be a string, got "
                                f"{type(token).__name__} {token!r}")
            if token in index:
                raise ValueError(f"Vocabulary: the token {token!r} is listed twice (ids "
                                 f"{index[token]} and {i})")
            index[token] = i
        self.tokens = tokens
        self._index = index
        self.tokenizer = _check_tokenizer(tokenizer, "Vocabulary")

    @classmethod
    def build(cls, texts: Iterable[str], *, min_freq: int = 1, max_size: int | None = None,
              tokenizer: Callable[[str], list[str]] | None = None, pad_token: str = "<pad>",
              unk_token: str = "<unk>") -> Vocabulary:
        """The vocabulary of ``texts``: the tokens seen at least ``min_freq`` times, most
        frequent first (ties alphabetical), at most ``max_size`` ids in all.

        Args:
            texts: strings (an iterable: read once).
            min_freq: the fewest occurrences of a token that keeps it (int >= 1).
            max_size: the most ids, the padding and unknown ids included (as Keras'
                ``max_tokens``; int >= 3), or None for every token kept by ``min_freq``.
            tokenizer: splits a text into tokens (default ``str.split``); kept for
                :meth:`encode`.
        """
        min_freq = Int(min=1).check("Vocabulary.build: min_freq", min_freq)
        max_size = Int(min=3, none_ok=True, says="an int >= 3 (the two special ids and one "
                       "token) or None").check("Vocabulary.build: max_size", max_size)
        split = _check_tokenizer(tokenizer, "Vocabulary.build")
        counts: Counter = Counter()
        for text in _texts(texts, "Vocabulary.build"):
            counts.update(split(text))
        counts.pop(pad_token, None)  # (the special tokens keep their ids)
        counts.pop(unk_token, None)
        kept = sorted((t for t, c in counts.items() if c >= min_freq),
                      key=lambda t: (-counts[t], t))
        if max_size is not None:
            kept = kept[:max_size - 2]
        return cls(kept, pad_token=pad_token, unk_token=unk_token, tokenizer=tokenizer)

    def __len__(self) -> int:
        """The number of ids (the special two included): an ``Embedding``'s
        ``num_embeddings``."""
        return len(self.tokens)

    def __contains__(self, token) -> bool:
        return token in self._index

    def __getitem__(self, token: str) -> int:
        """The id of ``token``; the unknown id for a token outside the vocabulary."""
        return self._index.get(token, UNK_ID)

    def encode(self, text: str) -> np.ndarray:
        """The ids (int64) of ``text``'s tokens, unknown tokens as :attr:`unk_id`."""
        if not isinstance(text, str):
            raise TypeError(f"Vocabulary.encode: expected a string, got {type(text).__name__}")
        get = self._index.get
        return np.array([get(t, UNK_ID) for t in self.tokenizer(text)], dtype=np.int64)

    def encode_all(self, texts: Iterable[str]) -> list[np.ndarray]:
        """:meth:`encode` of every text."""
        return [self.encode(t) for t in _texts(texts, "Vocabulary.encode_all")]

    def decode(self, ids) -> list[str]:
        """The tokens of ``ids`` (padding ids included, as ``"<pad>"``)."""
        ids = np.asarray(ids).reshape(-1)
        if ids.size and (ids.dtype.kind not in "iu" or ids.min() < 0 or ids.max() >= len(self)):
            raise ValueError(f"Vocabulary.decode: ids must be ints in [0, {len(self)}), got "
                             f"{ids.dtype} values in [{ids.min()}, {ids.max()}]")
        return [self.tokens[i] for i in ids.tolist()]

    def __repr__(self) -> str:
        shown = ", ".join(map(repr, self.tokens[2:7]))
        more = ", ..." if len(self) > 7 else ""
        return f"Vocabulary(size={len(self)}, tokens=[{shown}{more}])"


def _check_tokenizer(tokenizer, where: str):
    if tokenizer is None:
        return str.split
    if not callable(tokenizer):
        raise TypeError(f"{where}: tokenizer must be a callable text -> list of tokens, got "
                        f"{type(tokenizer).__name__}")
    return tokenizer


def _texts(texts, where: str):
    """The strings of ``texts``, each checked (a TypeError names the first that is not)."""
    if isinstance(texts, str):
        raise TypeError(f"{where}: texts must be a list of strings, got one string")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{where}: texts[{i}] must be a string, got {type(text).__name__}")
        yield text
