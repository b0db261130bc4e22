"""``nnjit predict RUN_ID|CHECKPOINT.nne --data FILE.csv --out predictions.csv``.

The model is rebuilt from the run config stored in the checkpoint's metadata (every checkpoint
of a run carries it), its weights loaded, and the CSV rows encoded with the run's saved
:class:`~nnjit.data.tabular_encoding.TabularEncoding` (column order, scaling, categories), so a
checkpoint file alone is enough. The output has one row per input row, in order: the predicted
value (the class label for classification) and, for classification, one probability column per
class.
"""

from __future__ import annotations

import itertools
import os

from nnjit.cli.errors import CommandError

#: Names of the output columns: ``predicted_<target>`` and ``probability_<class label>``.
PREDICTED = "predicted_{}"
PROBABILITY = "probability_{}"


def resolve_checkpoint(source: str, phase: str | None, root) -> tuple[str, str]:
    """``(path of the .nne file, how to name it)`` for a checkpoint path or a run id (its
    ``phase`` checkpoint; default best, else last)."""
    from nnjit.experiment import Checkpoints
    from nnjit.experiment.run_folder import Run

    if source.endswith(".nne") or os.path.isfile(source):
        if phase is not None:
            raise CommandError("--checkpoint picks a checkpoint of a run id; give either a run "
                               "id with --checkpoint or a .nne file")
        if not os.path.isfile(source):
            raise CommandError(f"no such checkpoint file: {source}")
        return source, source
    try:
        run = Run.load(source, root)
    except ValueError as e:
        raise CommandError(f"{e}; or give the path of a .nne checkpoint") from e
    except FileNotFoundError as e:
        raise CommandError(f"{e} (nnjit runs list --root {root} lists the runs)") from e
    wanted = [Checkpoints.get(phase)] if phase else [Checkpoints.BEST, Checkpoints.LAST]
    for candidate in wanted:
        try:
            return str(run.checkpoint(candidate)), f"run {run.display} ({candidate.value} " \
                                                   "checkpoint)"
        except FileNotFoundError as e:
            missing = e
    raise CommandError(f"{missing}; train the run first (nnjit train)")


def checkpoint_contents(path: str, name: str):
    """``(nne file, RunConfig, TabularEncoding)`` from a run checkpoint's metadata, checked."""
    from nnjit.data.tabular_encoding import TabularEncoding
    from nnjit.experiment import RunConfig
    from nnjit.train.checkpoint import ENCODING, RUN_CONFIG
    from nnjit.io.nne import NNEFormatError, load_nne

    try:
        nne = load_nne(path)
    except NNEFormatError as e:
        raise CommandError(f"{name} is not a valid .nne file: {e}") from e
    state = nne.metadata.get(RUN_CONFIG)
    if state is None:
        raise CommandError(
            f"{name} has no run config in its metadata (it was saved by save_weights or "
            "save_checkpoint outside a run, or by an older nnjit), so the model cannot be "
            "rebuilt; predict from a run id or one of its checkpoints/*.nne files, or load it "
            "in Python into the model it came from")
    try:
        config = RunConfig.from_state(state)
    except (ValueError, TypeError) as e:
        raise CommandError(f"{name}: invalid run config in its metadata: {e}") from e
    encoding = nne.metadata.get(ENCODING)
    if encoding is None:
        raise CommandError(
            f"{name} has no saved table encoding: its run was not trained on a CSV file (data "
            f"{config.data or 'passed in code'}), so CSV rows cannot be turned into its inputs; "
            "use the Python API (model.predict on arrays prepared as in training)")
    try:
        encoding = TabularEncoding.from_state(encoding, f"{name}: encoding")
    except ValueError as e:
        raise CommandError(str(e)) from e
    from nnjit.experiment import Nets

    if config.model.net.kind is not Nets.MLP:
        raise CommandError(f"{name}: a {config.model.net.kind.value} net takes a graph, not "
                           "CSV rows")
    if len(encoding.feature_names) != config.model.net.in_dim:
        raise CommandError(f"{name}: its encoding makes {len(encoding.feature_names)} input "
                           f"columns but its network takes {config.model.net.in_dim}; the file "
                           "is inconsistent")
    return nne, config, encoding


def read_rows(path: str, encoding):
    """The CSV's rows encoded as the training rows were (float32 ``X``)."""
    import pandas as pd

    from nnjit.io.regular import open_regular

    try:
        with open_regular(path, "rb") as fh:  # (a FIFO or a device is refused, never read)
            df = pd.read_csv(fh)
    except FileNotFoundError as e:
        raise CommandError(f"no such CSV file: {path}") from e
    except (OSError, ValueError) as e:  # unreadable, not regular, empty, malformed, not UTF-8
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)[:200]
        raise CommandError(f"cannot read the CSV {path}: {reason}") from e
    if len(df) == 0:
        raise CommandError(f"{path} has no rows to predict")
    try:
        return encoding.transform(df)
    except ValueError as e:
        raise CommandError(f"cannot use the rows of {path}: "
                           f"{str(e).removeprefix('transform: ')}") from e


def predictions_frame(config, encoding, outputs, proba):
    """The output table: the predicted value or label, and one probability column per class."""
    import numpy as np
    import pandas as pd

    if encoding.task == "regression":
        targets = encoding.target if isinstance(encoding.target, tuple) else (encoding.target,)
        return pd.DataFrame({PREDICTED.format(t): outputs[:, k] for k, t in enumerate(targets)})
    classes = list(encoding.classes)
    if proba.shape[1] == 1 and len(classes) == 2:  # one binary logit: P(class 1)
        proba = np.concatenate([1.0 - proba, proba], axis=1)
    if proba.shape[1] != len(classes):
        raise CommandError(f"the network has {proba.shape[1]} outputs for {len(classes)} "
                           "classes; the checkpoint is inconsistent")
    frame = pd.DataFrame({PREDICTED.format(encoding.target):
                          encoding.decode_labels(proba.argmax(axis=1))})
    for k, label in enumerate(classes):
        frame[PROBABILITY.format(label)] = proba[:, k]
    return frame


def check_size(config, nne, name: str) -> None:
    """A CommandError, before any model is built, when the checkpoint's run config asks for more
    parameters than the file holds: the config is as untrusted as the file, and building its
    model allocates them all (``hidden_dims: [10000000]`` in a 6 KB file asked for 74.5 GiB)."""
    from nnjit.io.weights import PARAMS

    net = config.model.net
    dims = (net.in_dim, *net.hidden_dims, net.out_dim)
    wanted = sum(a * b + b for a, b in itertools.pairwise(dims))
    held = sum(int(t.size) for t in nne.groups.get(PARAMS, {}).values())
    if wanted > held:
        from nnjit.experiment.excerpt import excerpt

        raise CommandError(f"{name}: its run config's network (in_dim {net.in_dim}, hidden_dims "
                           f"{excerpt(list(net.hidden_dims))}, out_dim {net.out_dim}) has "
                           f"{wanted:,} parameters but the file holds {held:,} values; the "
                           f"checkpoint is inconsistent")


def infer(config, path: str, X, nne=None, name: str = ""):
    """``(outputs, probabilities or None)`` of the checkpoint's weights on ``X`` (``nne``, the
    loaded file, bounds the model its config builds)."""
    from nnjit.train.trainer import Trainer

    if nne is not None:
        check_size(config, nne, name or path)
    model = config.model.build()
    trainer = Trainer(model, config.optimizer.build(), config.model.build_loss(),
                      dtype=config.model.numpy_dtype, seed=config.train.seed)
    try:
        trainer.load_checkpoint(path)
    except ValueError as e:  # NNEFormatError, StateMismatchError: a forged or damaged file
        raise CommandError(f"cannot load {name}: {e}") from e
    if trainer.loss.is_classification:
        return None, trainer.predict_proba(X)
    return trainer.predict_outputs(X), None


def cmd_predict(args) -> int:
    from nnjit.io.atomic import atomic_write_text

    path, name = resolve_checkpoint(args.source, args.checkpoint, args.root)
    nne, config, encoding = checkpoint_contents(path, name)
    X = read_rows(args.data, encoding)
    outputs, proba = infer(config, path, X, nne, name)
    frame = predictions_frame(config, encoding, outputs, proba)
    try:
        atomic_write_text(args.out, frame.to_csv(index=False))
    except OSError as e:
        raise CommandError(f"cannot write {args.out}: {e.strerror or e}") from e
    epoch = nne.metadata.get("epoch")
    print(f"{len(frame)} predictions of {name}{f', epoch {epoch}' if epoch else ''} "
          f"written to {args.out}")
    return 0
