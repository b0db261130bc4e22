"""Vocabulary and SequenceDataset: ids from strings, padding and truncation, the arguments they
refuse by name, and the dataset trained on, evaluated and predicted by a recurrent model."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit
from nnjit import nn

TEXTS = ["the cat sat", "the dog sat down", "a cat", "the the cat", "dog"]


def test_vocabulary_counts_orders_and_caps():
    vocab = nnjit.Vocabulary.build(TEXTS)
    # the: 4, cat: 3, dog: 2, sat: 2 (ties alphabetical), then a, down (once each)
    assert vocab.tokens == ["<pad>", "<unk>", "the", "cat", "dog", "sat", "a", "down"]
    assert (vocab.pad_id, vocab.unk_id, len(vocab)) == (0, 1, 8)
    assert nnjit.Vocabulary.build(TEXTS, min_freq=2).tokens[2:] == ["the", "cat", "dog", "sat"]
    assert nnjit.Vocabulary.build(TEXTS, max_size=4).tokens == ["<pad>", "<unk>", "the", "cat"]
    assert vocab["cat"] == 3 and vocab["zebra"] == vocab.unk_id and "zebra" not in vocab
    np.testing.assert_array_equal(vocab.encode("the zebra sat"), [2, 1, 5])
    assert vocab.encode("the zebra sat").dtype == np.int64
    assert vocab.decode([2, 1, 5, 0]) == ["the", "<unk>", "sat", "<pad>"]
    again = nnjit.Vocabulary(vocab.tokens)  # rebuilt from its saved token list
    assert again.tokens == vocab.tokens
    assert nnjit.Vocabulary(["x", "y"]).tokens == ["<pad>", "<unk>", "x", "y"]


def test_vocabulary_tokenizer_is_kept_for_encode():
    vocab = nnjit.Vocabulary.build(["A,b", "a,B"], tokenizer=lambda t: t.lower().split(","))
    assert vocab.tokens[2:] == ["a", "b"]
    np.testing.assert_array_equal(vocab.encode("B,c"), [3, 1])


@pytest.mark.parametrize("call, match", [
    (lambda: nnjit.Vocabulary.build(TEXTS, min_freq=0), "Vocabulary.build: min_freq"),
    (lambda: nnjit.Vocabulary.build(TEXTS, max_size=2), "Vocabulary.build: max_size"),
    (lambda: nnjit.Vocabulary.build("the cat"), "texts must be a list of strings"),
    (lambda: nnjit.Vocabulary.build(["a", 3]), r"texts\[1\] must be a string"),
    (lambda: nnjit.Vocabulary(["a", "b", "a"]), "'a' is listed twice"),
    (lambda: nnjit.Vocabulary(["a"], tokenizer=3), "tokenizer must be a callable"),
    (lambda: nnjit.Vocabulary(["a"]).decode([4]), r"ids must be ints in \[0, 3\)"),
])
def test_vocabulary_refuses_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_token_sequences_are_padded_with_their_lengths():
    ds = nnjit.SequenceDataset([[5, 6, 7], [8], np.array([9, 10])], [1, 0, 1])
    np.testing.assert_array_equal(ds.tokens, [[5, 6, 7], [8, 0, 0], [9, 10, 0]])
    np.testing.assert_array_equal(ds.lengths, [[3], [1], [2]])
    assert ds.tokens.dtype == ds.lengths.dtype == np.int64 and ds.steps == 3
    assert ds.inputs[0] is ds.tokens and ds.inputs[1] is ds.lengths
    seq, label = ds[2]
    np.testing.assert_array_equal(seq, [9, 10])
    assert label == 1 and len(ds) == 3


@pytest.mark.parametrize("truncating, kept", [("pre", [[6, 7], [8, 0]]),
                                              ("post", [[5, 6], [8, 0]])])
def test_max_len_pads_and_truncates(truncating, kept):
    ds = nnjit.SequenceDataset([[5, 6, 7], [8]], max_len=2, truncating=truncating, pad_id=0)
    np.testing.assert_array_equal(ds.tokens, kept)
    np.testing.assert_array_equal(ds.lengths, [[2], [1]])
    wider = nnjit.SequenceDataset([[5, 6, 7], [8]], max_len=5, pad_id=3)
    np.testing.assert_array_equal(wider.tokens, [[5, 6, 7, 3, 3], [8, 3, 3, 3, 3]])


def test_feature_sequences_and_a_padded_array():
    rng = np.random.default_rng(0)
    rows = [rng.normal(size=(k, 3)).astype(np.float32) for k in (4, 2, 3)]
    ds = nnjit.SequenceDataset(rows, np.array([0.5, 1.0, 2.0]))
    assert ds.tokens.shape == (3, 4, 3) and ds.tokens.dtype == np.float32
    np.testing.assert_array_equal(ds.tokens[1, :2], rows[1])
    assert not ds.tokens[1, 2:].any()
    padded = nnjit.SequenceDataset(ds.tokens, lengths=ds.lengths[:, 0])
    np.testing.assert_array_equal(padded.tokens, ds.tokens)
    np.testing.assert_array_equal(padded.lengths, ds.lengths)
    whole = nnjit.SequenceDataset(np.array([[1, 2], [3, 4]]))  # every step valid
    np.testing.assert_array_equal(whole.lengths, [[2], [2]])


@pytest.mark.parametrize("call, match", [
    (lambda: nnjit.SequenceDataset([[1, 2], []]), r"sequences\[1\] is empty"),
    (lambda: nnjit.SequenceDataset([[1, 2], [0.5]]), r"sequences\[1\] holds float64"),
    (lambda: nnjit.SequenceDataset([[1, 2], [-1]]), r"sequences\[1\] holds the token id -1"),
    (lambda: nnjit.SequenceDataset([np.zeros((2, 3)), np.zeros((2, 4))]),
     r"sequences\[1\] has shape \(2, 4\).*all must be alike"),
    (lambda: nnjit.SequenceDataset([np.array([[0.0, np.nan]])]),
     r"sequences\[0\] contains NaN or inf \(first at step 0\)"),
    (lambda: nnjit.SequenceDataset(["a cat"]), r"sequences\[0\] is a string.*from_texts"),
    (lambda: nnjit.SequenceDataset([]), "sequences is empty"),
    (lambda: nnjit.SequenceDataset([[1]], [0, 1]), r"labels must have shape \(1,\)"),
    (lambda: nnjit.SequenceDataset([[1]], max_len=0), "SequenceDataset: max_len"),
    (lambda: nnjit.SequenceDataset([[1]], truncating="middle"), "SequenceDataset: truncating"),
    (lambda: nnjit.SequenceDataset(np.ones((2, 3), int), lengths=[3, 4]),
     r"lengths\[1\] is 4, outside 1 \.\. 3"),
    (lambda: nnjit.SequenceDataset([[1]], lengths=[1]), "lengths= goes with an already padded"),
    (lambda: nnjit.SequenceDataset([[5]], vocab=nnjit.Vocabulary(["a"])),
     "token id 5 is beyond the vocabulary's 3 ids"),
    (lambda: nnjit.SequenceDataset.from_texts(["a b", "  "]), r"texts\[1\] has no tokens"),
    (lambda: nnjit.DataLoader(nnjit.SequenceDataset([[1]], [0]), [1]),
     "a SequenceDataset holds its labels"),
])
def test_sequence_dataset_refuses_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_from_texts_builds_or_reuses_a_vocabulary():
    train = nnjit.SequenceDataset.from_texts(TEXTS, [0, 1, 0, 0, 1], min_freq=2)
    assert train.vocab.tokens[2:] == ["the", "cat", "dog", "sat"]
    np.testing.assert_array_equal(train.tokens[1], [2, 4, 5, 1])  # "down": unknown
    test = nnjit.SequenceDataset.from_texts(["a bird sat"], [1], vocab=train.vocab)
    np.testing.assert_array_equal(test.tokens, [[1, 1, 5]])
    assert test.vocab is train.vocab
    part = train.subset([0, 2])
    assert part.steps == train.steps and part.labels.tolist() == [0, 0]
    np.testing.assert_array_equal(part.lengths, [[3], [2]])


class Classifier(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, 8)
        self.gru = nn.GRU(8, 8, batch_first=True)
        self.fc = nn.Linear(8, 2)

    def forward(self, tokens, lengths):
        _, h_n = self.gru(self.emb(tokens), lengths=lengths)
        return self.fc(h_n.view(-1, 8))


def test_a_recurrent_model_fits_evaluates_and_predicts_the_dataset():
    rng = np.random.default_rng(0)
    words = ["good", "bad", "the", "a", "film", "plot"]
    texts, labels = [], []
    for _ in range(160):
        label = int(rng.integers(0, 2))
        filler = list(rng.choice(words[2:], rng.integers(0, 6)))
        filler.insert(int(rng.integers(0, len(filler) + 1)), words[1 - label])
        texts.append(" ".join(filler))
        labels.append(label)
    data = nnjit.SequenceDataset.from_texts(texts, labels)
    train, test = data.subset(slice(0, 128)), data.subset(slice(128, None))
    trainer = nnjit.Trainer(Classifier(len(data.vocab)), nnjit.Adam(lr=2e-2), seed=0)
    history = trainer.fit(train, epochs=12, batch_size=16, shuffle=True, verbose=False,
                          n_iter_no_change=None)
    assert history["train_loss"].iloc[-1] < 0.5 * history["train_loss"].iloc[0]
    assert trainer.evaluate(test)["accuracy"] >= 0.9
    # the dataset, its DataLoader and its arrays are the same inputs
    np.testing.assert_array_equal(trainer.predict(test), trainer.predict(test.inputs))
    loader = nnjit.DataLoader(test, batch_size=8, shuffle=False)
    assert loader.n_samples == 32 and loader.y is test.labels
    assert trainer.evaluate(loader) == trainer.evaluate(test.inputs, test.labels)
