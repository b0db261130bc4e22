"""``SequenceDataset``: sequences of different lengths, padded into one array, with their
lengths beside them: the ``(tokens, lengths)`` inputs of a recurrent model.

- ``SequenceDataset(sequences, labels)``: each sequence a 1-D array of token ids (ints) or a
  2-D array ``(steps, features)`` of numbers (a series, an event log's feature rows).
- ``SequenceDataset.from_texts(texts, labels, min_freq=..., max_size=...)``: strings, encoded
  with a :class:`~nnjit.data.vocabulary.Vocabulary` built from them (or one given).

The sequences are padded at their end to one length: the longest, or ``max_len`` (longer ones
are truncated, at the start by default as Keras' ``pad_sequences``). Token ids are padded with
``pad_id`` (0, the vocabulary's padding id), feature rows with zeros. ``dataset.inputs`` is
``(tokens (N, steps[, features]), lengths (N, 1))``, which a model's ``forward(self, tokens,
lengths)`` takes (``lengths=`` of ``nn.LSTM``, ``nn.GRU``, ``nn.RNN``);
``DataLoader(dataset, batch_size=32)``, ``trainer.fit(dataset, ...)``, ``evaluate`` and
``predict`` accept the dataset itself.

Why one length for every batch, not each batch padded to its own longest: the compiled loop
reads rows of one width, laid out once (a new width would lay the model out again). Padding is
not free: the recurrent scan skips padded steps, but the ``Embedding`` and the input
projections of all steps run over them. Measured (Embedding(5000, 64) -> LSTM(64, 128), 2,000
sequences of mean length 35, at most 50, batch 32, shared machine): 0.98 s an epoch padded to
50 steps, 2.31 s to 100, 3.37 s to 200. So set ``max_len`` near the longest lengths that
matter when a few sequences are much longer than the rest.
"""

from __future__ import annotations

import numpy as np

from nnjit.checks import Choice, Int
from nnjit.data.inputs import all_finite
from nnjit.data.vocabulary import PAD_ID, Vocabulary

__all__ = ["SequenceDataset"]


class SequenceDataset:
    """Sequences of different lengths and their labels, padded for a recurrent model.

    Args:
        sequences: a list of sequences, each a 1-D array (list) of token ids (ints >= 0), or
            each a 2-D array ``(steps, features)`` of finite numbers, the same ``features``
            for all; every sequence at least one step long. A 2-D int array ``(N, steps)`` is
            read as N sequences of ``steps`` tokens (give ``lengths`` for its padding).
        labels: one target per sequence (class indices ``(N,)`` or targets ``(N, K)``, what a
            DataLoader's ``y`` takes), or None (prediction).
        lengths: with an already padded ``sequences`` array, each row's valid steps (ints in
            ``1 .. steps``); None: every step of every row is valid (a list's own lengths).
        max_len: pad (and truncate) to this many steps (int >= 1); None: the longest sequence.
        truncating: ``"pre"`` (default, as Keras) drops the start of a sequence longer than
            ``max_len``, ``"post"`` its end.
        pad_id: the token id of padded steps (default 0, :class:`Vocabulary`'s padding id).
        vocab: the :class:`Vocabulary` the token ids come from (kept as ``dataset.vocab``).

    Attributes:
        tokens: ``(N, steps)`` int64 token ids, or ``(N, steps, features)`` float32/float64.
        lengths: ``(N, 1)`` int64, each sequence's steps after truncation.
        labels: the labels (int64 for class indices), or None.
        vocab: the :class:`Vocabulary`, or None.
    """

    def __init__(self, sequences, labels=None, *, lengths=None, max_len: int | None = None,
                 truncating: str = "pre", pad_id: int = PAD_ID,
                 vocab: Vocabulary | None = None):
        where = "SequenceDataset"
        max_len = Int(min=1, none_ok=True).check(f"{where}: max_len", max_len)
        truncating = Choice("pre", "post").check(f"{where}: truncating", truncating)
        pad_id = Int(min=0).check(f"{where}: pad_id", pad_id)
        if vocab is not None and not isinstance(vocab, Vocabulary):
            raise TypeError(f"{where}: vocab must be a Vocabulary or None, got "
                            f"{type(vocab).__name__}")
        if isinstance(sequences, np.ndarray) and sequences.ndim >= 2 and sequences.dtype != object:
            rows = _padded_rows(sequences, lengths, where)
        elif lengths is not None:
            raise ValueError(f"{where}: lengths= goes with an already padded array (N, steps); "
                             "a list of sequences has its own lengths")
        else:
            rows = _sequence_list(sequences, where)
        self.tokens, self.lengths = _pad(rows, max_len, truncating, pad_id)
        if vocab is not None and self.tokens.dtype.kind == "i" and self.tokens.size and \
                int(self.tokens.max()) >= len(vocab):
            raise ValueError(f"{where}: token id {int(self.tokens.max())} is beyond the "
                             f"vocabulary's {len(vocab)} ids")
        self.labels = None if labels is None else _as_labels(labels, len(self.tokens), where)
        self.vocab = vocab
        self.pad_id = pad_id

    @classmethod
    def from_texts(cls, texts, labels=None, vocab: Vocabulary | None = None, *,
                   min_freq: int = 1, max_size: int | None = None, tokenizer=None,
                   max_len: int | None = None, truncating: str = "pre") -> SequenceDataset:
        """Strings as token ids: with ``vocab``, or a :class:`Vocabulary` built from ``texts``
        (``min_freq``, ``max_size``, ``tokenizer``: see :meth:`Vocabulary.build`). Build the
        vocabulary of the training texts, then pass it for the validation and test texts (their
        new tokens become the unknown id).

        Raises:
            ValueError: a text without tokens (the message names it: a recurrent layer needs at
                least one step), or arguments out of range.
        """
        texts = list(texts) if not isinstance(texts, str) else texts
        if vocab is None:
            vocab = Vocabulary.build(texts, min_freq=min_freq, max_size=max_size,
                                     tokenizer=tokenizer)
        elif not isinstance(vocab, Vocabulary):
            raise TypeError(f"SequenceDataset.from_texts: vocab must be a Vocabulary or None, "
                            f"got {type(vocab).__name__}")
        ids = vocab.encode_all(texts)
        for i, row in enumerate(ids):
            if not len(row):
                raise ValueError(f"SequenceDataset.from_texts: texts[{i}] has no tokens "
                                 f"({texts[i]!r}); a sequence needs at least one step")
        return cls(ids, labels, max_len=max_len, truncating=truncating, pad_id=vocab.pad_id,
                   vocab=vocab)

    @property
    def inputs(self) -> tuple[np.ndarray, np.ndarray]:
        """``(tokens, lengths)``: the model's two inputs."""
        return self.tokens, self.lengths

    @property
    def steps(self) -> int:
        """The padded length."""
        return int(self.tokens.shape[1])

    def subset(self, rows) -> SequenceDataset:
        """The sequences ``rows`` (a slice, indices or a bool mask) with their labels, padded as
        here (the same steps: a model traced on one part runs on the other)."""
        out = object.__new__(SequenceDataset)
        out.tokens, out.lengths = self.tokens[rows], self.lengths[rows]
        if out.tokens.ndim < self.tokens.ndim or not len(out.tokens):
            raise ValueError(f"SequenceDataset.subset: rows must select at least one sequence "
                             f"(a slice, indices or a mask), got {rows!r}")
        out.labels = None if self.labels is None else self.labels[rows]
        out.vocab, out.pad_id = self.vocab, self.pad_id
        return out

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, index):
        """``(sequence without its padding, label)`` of sequence ``index``."""
        n = int(self.lengths[index, 0])
        return self.tokens[index, :n], None if self.labels is None else self.labels[index]

    def __repr__(self) -> str:
        kind = ("tokens" if self.tokens.ndim == 2
                else f"features={self.tokens.shape[2]}")
        return (f"SequenceDataset(n_samples={len(self)}, steps={self.steps}, {kind}, "
                f"mean_length={float(self.lengths.mean()):.1f}, "
                f"vocab={None if self.vocab is None else len(self.vocab)})")


def _sequence_list(sequences, where: str) -> list[np.ndarray]:
    """Each sequence as an array: all 1-D ints, or all 2-D numbers of one width."""
    if isinstance(sequences, (str, bytes)) or not hasattr(sequences, "__len__"):
        raise TypeError(f"{where}: sequences must be a list of arrays (token ids, or "
                        f"(steps, features) rows), got {type(sequences).__name__}")
    if not len(sequences):
        raise ValueError(f"{where}: sequences is empty (0 samples)")
    rows, first = [], None
    for i, seq in enumerate(sequences):
        if isinstance(seq, str):
            raise TypeError(f"{where}: sequences[{i}] is a string; use "
                            "SequenceDataset.from_texts(texts, labels) for text")
        a = np.asarray(seq)
        name = f"{where}: sequences[{i}]"
        if a.ndim not in (1, 2) or a.dtype.kind not in "iufb":
            raise ValueError(f"{name} must be a 1-D array of token ids or a 2-D array (steps, "
                             f"features) of numbers, got shape {a.shape} dtype {a.dtype}")
        if len(a) == 0:
            raise ValueError(f"{name} is empty: a sequence needs at least one step (a recurrent "
                             "layer's lengths are 1 .. steps)")
        kind = (a.ndim, a.shape[1] if a.ndim == 2 else None, a.dtype.kind in "iu")
        if first is None:
            first = kind
        elif kind[:2] != first[:2]:
            raise ValueError(f"{name} has shape {a.shape} dtype {a.dtype}; sequences[0] set "
                             f"{_describe(first)}: all must be alike")
        if a.ndim == 1 and not kind[2]:
            raise ValueError(f"{name} holds {a.dtype} values: 1-D sequences are token ids "
                             "(ints); give feature steps as (steps, features) arrays")
        if a.ndim == 1 and a.min() < 0:
            raise ValueError(f"{name} holds the token id {int(a.min())}: ids are >= 0")
        if a.ndim == 2 and not all_finite(a):
            step = int(np.argwhere(~np.isfinite(a))[0][0])
            raise ValueError(f"{name} contains NaN or inf (first at step {step})")
        rows.append(a)
    return rows


def _describe(kind) -> str:
    ndim, width, _ = kind
    return "token ids (1-D)" if ndim == 1 else f"(steps, {width}) feature rows"


def _padded_rows(array: np.ndarray, lengths, where: str) -> list[np.ndarray]:
    """The sequences of an already padded ``(N, steps[, features])`` array."""
    if array.ndim > 3 or array.dtype.kind not in "iufb" or (array.ndim == 2
                                                           and array.dtype.kind not in "iu"):
        raise ValueError(f"{where}: a padded array must be (N, steps) token ids or (N, steps, "
                         f"features) numbers, got shape {array.shape} dtype {array.dtype}")
    if 0 in array.shape:
        raise ValueError(f"{where}: sequences is empty (shape {array.shape})")
    n, steps = array.shape[:2]
    if lengths is None:
        lengths = np.full(n, steps)
    lengths = np.asarray(lengths)
    if lengths.dtype.kind not in "iu" or lengths.size != n or lengths.ndim not in (1, 2):
        raise ValueError(f"{where}: lengths must be {n} ints (shape ({n},) or ({n}, 1)), got "
                         f"shape {lengths.shape} dtype {lengths.dtype}")
    lengths = lengths.reshape(-1)
    bad = np.flatnonzero((lengths < 1) | (lengths > steps))
    if bad.size:
        raise ValueError(f"{where}: lengths[{bad[0]}] is {int(lengths[bad[0]])}, outside "
                         f"1 .. {steps} (the array's steps)")
    return _sequence_list([array[i, :k] for i, k in enumerate(lengths.tolist())], where)


def _pad(rows: list[np.ndarray], max_len, truncating: str, pad_id: int):
    """``(padded (N, T[, F]), lengths (N, 1) int64)`` of ``rows``."""
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    steps = int(lengths.max()) if max_len is None else max_len
    np.minimum(lengths, steps, out=lengths)
    first = rows[0]
    if first.ndim == 1:
        out = np.full((len(rows), steps), pad_id, dtype=np.int64)
    else:
        dtype = np.result_type(np.float32, *(r.dtype for r in rows))
        out = np.zeros((len(rows), steps, first.shape[1]), dtype=dtype)
    for i, (row, k) in enumerate(zip(rows, lengths.tolist())):
        out[i, :k] = row[len(row) - k:] if truncating == "pre" else row[:k]
    return out, lengths.reshape(-1, 1)


def _as_labels(labels, n: int, where: str) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim not in (1, 2) or len(labels) != n:
        raise ValueError(f"{where}: labels must have shape ({n},) or ({n}, K) for {n} "
                         f"sequences, got {labels.shape}")
    if labels.dtype.kind not in "biuf":
        raise ValueError(f"{where}: labels must be numeric, got dtype {labels.dtype}")
    if not all_finite(labels):
        raise ValueError(f"{where}: labels contain NaN or inf")
    if labels.ndim == 1 and labels.dtype.kind in "iu":
        if labels.min() < 0:
            raise ValueError(f"{where}: labels must be class indices >= 0, got "
                             f"{int(labels.min())}")
        labels = labels.astype(np.int64, copy=False)
    return labels
