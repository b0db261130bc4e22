"""Memory a program's arenas need, and what the machine and the process allow: the sizes an
arena error states.

An arena allocation fails in two ways: the arenas are larger than the machine's RAM (refused
before allocating: Linux's overcommit would accept them, then swap or kill the process), or the
allocation itself fails under a smaller limit (the process's address-space limit, ``ulimit -v``,
or a container's memory limit). :class:`ArenaTooLarge` says which, with the true sizes: the
arenas' (values and gradients) and the limits in force.
"""

from __future__ import annotations

import os


def format_bytes(n: float) -> str:
    """``n`` bytes as ``"512 bytes"``, ``"3.2 MiB"``, ``"1.5 GiB"``."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # (unreachable)


def physical_memory() -> int:
    """Bytes of RAM (a very large number where the platform does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 2**62


def _proc_kib(path: str, field: str) -> int | None:
    """A ``field: N kB`` line of a /proc file, in bytes (None where there is none)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_limit() -> int | None:
    """The memory limit of the process's cgroup (v2 ``memory.max``), None when unlimited."""
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            text = f.read().strip()
        return None if text == "max" else int(text)
    except (OSError, ValueError):
        return None


def memory_situation() -> str:
    """What limits an allocation here, in words: the process's address-space limit and how much
    of it is mapped, a container's memory limit, and the RAM available of the machine's."""
    parts = []
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            mapped = _proc_kib("/proc/self/status", "VmSize")
            parts.append(f"this process may map {format_bytes(soft)} (ulimit -v)"
                         + (f", {format_bytes(mapped)} of it already mapped" if mapped else ""))
    except (ImportError, OSError, ValueError):
        pass
    limit = _cgroup_limit()
    if limit is not None:
        parts.append(f"its container's memory limit is {format_bytes(limit)}")
    available = _proc_kib("/proc/meminfo", "MemAvailable")
    ram = format_bytes(physical_memory())
    parts.append(f"the machine has {format_bytes(available)} of its {ram} of RAM available"
                 if available is not None else f"the machine has {ram} of RAM")
    return "; ".join(parts)


class ArenaTooLarge(MemoryError):
    """A program's arenas for ``max_batch`` rows (``values_bytes`` of values, ``grads_bytes``
    of gradients) could not be had: more than the machine's RAM (``failed`` False: refused
    before allocating), or the allocation failed (``failed`` True). The layout service turns it
    into a message naming ``batch_size``."""

    def __init__(self, values_bytes: int, grads_bytes: int, max_batch: int, failed: bool):
        self.values_bytes, self.grads_bytes = int(values_bytes), int(grads_bytes)
        self.nbytes = self.values_bytes + self.grads_bytes
        self.max_batch, self.failed = int(max_batch), bool(failed)
        self.why = (f"allocating them failed: {memory_situation()}" if failed else
                    f"more than this machine's {format_bytes(physical_memory())} of RAM")
        super().__init__(f"the model's arenas for batches of {self.max_batch:,} rows need "
                         f"{self.sizes()}; {self.why}")

    def sizes(self) -> str:
        """``"2.4 GiB (1.2 GiB of values, 1.2 GiB of gradients)"``."""
        return (f"{format_bytes(self.nbytes)} ({format_bytes(self.values_bytes)} of values, "
                f"{format_bytes(self.grads_bytes)} of gradients)")
