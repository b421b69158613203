"""Host memory in 2 MiB pages for the host copy of every expert, page-locked beside a GPU.

The CPU site's kernel streams a layer's experts out of the host copy (at OLMoE's shape
100 MB a layer out of 12.9 GB). In 4 KiB pages each 4 KiB of that stream costs a page
walk, and the copy's page tables (25 MB at that size) do not stay in cache, so the walks
go to memory beside the stream. The copy is therefore mapped here and asked for
transparent huge pages (`madvise`; a kernel set to `never` leaves it in small pages), and
beside a GPU registered with CUDA as page-locked (cudaHostRegister), where torch's own
page-locked allocations (cudaHostAlloc) take small pages. Where no such mapping can be made
(no POSIX mmap) torch allocates it as before.
"""

from __future__ import annotations

import ctypes
import mmap

import torch

HUGE = 2 << 20  # a transparent huge page (x86-64; arm64 with 4 KiB base pages)
PORTABLE, MAPPED = 1, 2  # cudaHostRegister flags


class _Mapping:
    """An anonymous private mapping; unregistered and unmapped when the last tensor over it
    is freed (each tensor keeps the buffer that keeps this)."""

    def __init__(self, size: int, pin: bool):
        self.size, self.pinned = size, False
        self.ptr = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE,
                              mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        if self.ptr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap of {size} bytes failed")
        _libc.madvise(self.ptr, size, mmap.MADV_HUGEPAGE)  # a hint: no huge pages is fine
        if pin:
            # portable and mapped, as cudaHostAlloc's memory is under unified addressing: the
            # kernels that read misses in place take its host pointer
            err = torch.cuda.cudart().cudaHostRegister(self.ptr, size, PORTABLE | MAPPED)
            if int(err) != 0:
                self.__del__()
                raise OSError(f"cudaHostRegister of {size} bytes failed: CUDA error {int(err)}")
            self.pinned = True

    def __del__(self) -> None:
        if self.pinned:
            torch.cuda.cudart().cudaHostUnregister(self.ptr)
            self.pinned = False
        if self.ptr is not None:
            _libc.munmap(self.ptr, self.size)
            self.ptr = None


def _load_libc() -> ctypes.CDLL | None:
    if not hasattr(mmap, "MADV_HUGEPAGE"):  # Linux only: elsewhere torch's allocations
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc


_libc = _load_libc()


def zeros(rows: int, row_bytes: int, pin: bool = False) -> torch.Tensor:
    """[rows, row_bytes] uint8 zeros starting on a 2 MiB boundary in memory that asked for
    huge pages, page-locked for CUDA with `pin`; torch's allocation where that cannot be
    made."""
    nbytes = rows * row_bytes
    if _libc is None or nbytes < HUGE:
        return torch.zeros(rows, row_bytes, dtype=torch.uint8, pin_memory=pin)
    try:
        m = _Mapping(-(-nbytes // HUGE) * HUGE + HUGE, pin)  # room to start on a boundary
    except OSError:  # no room to map or lock it so: as torch would have allocated it
        return torch.zeros(rows, row_bytes, dtype=torch.uint8, pin_memory=pin)
    buf = (ctypes.c_uint8 * m.size).from_address(m.ptr)
    buf._mapping = m  # type: ignore[attr-defined]  # the buffer keeps the mapping
    start = -m.ptr % HUGE
    # fresh anonymous pages read as zeros: nothing to write
    return torch.frombuffer(buf, dtype=torch.uint8)[start:start + nbytes].view(rows, row_bytes)
