"""Write examples/iris.csv, the CSV that examples/tabular_csv.yaml trains on.

The rows are nnjit's bundled Iris data (``nnjit.datasets.load_iris()``, Fisher's Iris from the
UCI repository, CC BY 4.0: R. A. Fisher, 1936; UCI Machine Learning Repository) in their
original order: four measurements in cm, then the species as a string, so the CSV path of
``nnjit train`` (``TabularDataset.from_dataframe``) maps string labels to classes itself.
Running the script again rewrites the same bytes.
"""

from pathlib import Path

import numpy as np

import nnjit as nn

COLUMNS = ("sepal_length", "sepal_width", "petal_length", "petal_width", "species")


def iris_csv() -> str:
    data = nn.datasets.load_iris()
    X = np.round(data.X.astype(np.float64), 1)  # float32 -> the one-decimal values measured
    species = np.asarray(data.target_names)[data.y]
    lines = [",".join(COLUMNS)]
    lines += [",".join(f"{v:.1f}" for v in row) + f",{name}" for row, name in zip(X, species)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    path = Path(__file__).with_name("iris.csv")
    path.write_text(iris_csv(), encoding="utf-8", newline="\n")
    print(f"wrote {path} ({path.stat().st_size} bytes)")
