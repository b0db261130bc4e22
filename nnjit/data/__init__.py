"""Data for training: loaders, graphs, tables, images and their augmentation."""

from nnjit.data.augment import Augment as Augment
from nnjit.data.images import ImageDataset as ImageDataset
