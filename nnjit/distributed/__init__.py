"""Training beyond one process: data-parallel fits over MPI (:class:`MPI`)."""

from nnjit.distributed.mpi import MPI, DistributedFitError, launched_by_mpi

__all__ = ["MPI", "DistributedFitError", "launched_by_mpi"]
