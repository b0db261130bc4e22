"""Training beyond one process: data-parallel fits over MPI (:class:`MPI`)."""

from nnjit.distributed.mpi import MPI, launched_by_mpi

__all__ = ["MPI", "launched_by_mpi"]
