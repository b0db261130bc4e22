"""File formats, below every layer that uses them: the ``.nne`` container (:mod:`nnjit.io.nne`),
atomic file replacement (:mod:`nnjit.io.atomic`) and a module's weights in ``.nne`` files
(:mod:`nnjit.io.weights`). Nothing here imports from ``nn``, ``train`` or ``experiment``.
"""
