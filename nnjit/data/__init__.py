"""Data for training: loaders, graphs, tables, images and their augmentation, sequences."""

from nnjit.data.augment import Augment as Augment
from nnjit.data.images import ImageDataset as ImageDataset
from nnjit.data.sequences import SequenceDataset as SequenceDataset
from nnjit.data.vocabulary import Vocabulary as Vocabulary
