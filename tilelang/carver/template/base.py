"""`BaseTemplate`: a computation plus the device it is recommended for (the reference's API:
`with_arch`, `recommend_hints`, `equivalent_function`, the architecture predicates)."""

from __future__ import annotations

from ..arch.cuda import (is_ampere_arch, is_cdna_arch, is_cuda_arch, is_hopper_arch,
                         is_rdna_arch, is_volta_arch)

__all__ = ["BaseTemplate"]


class BaseTemplate:
    _arch = None
    _func = None

    def with_arch(self, arch) -> "BaseTemplate":
        self._arch = arch
        self._func = None  # built for the device's best configuration on demand
        return self

    def has_arch(self) -> bool:
        return self._arch is not None

    @property
    def arch(self):
        return self._arch

    def is_cuda_arch(self) -> bool:
        return is_cuda_arch(self._arch)

    def is_volta_arch(self) -> bool:
        return is_volta_arch(self._arch) if self._arch is not None else False

    def is_ampere_arch(self) -> bool:
        return is_ampere_arch(self._arch) if self._arch is not None else False

    def is_hopper_arch(self) -> bool:
        return is_hopper_arch(self._arch) if self._arch is not None else False

    def is_cdna_arch(self) -> bool:
        return is_cdna_arch(self._arch)

    def is_rdna_arch(self) -> bool:
        return is_rdna_arch(self._arch)

    def get_hardware_aware_configs(self, arch=None, topk: int = 10) -> list:
        raise NotImplementedError

    def recommend_hints(self, topk: int = 10) -> list:
        """The `topk` best configurations for the template's device, best first."""
        if self._arch is None:
            raise ValueError(f"{type(self).__name__}.recommend_hints needs a device: call "
                             ".with_arch(CUDA('cuda')) first")
        return self.get_hardware_aware_configs(self._arch, topk)

    def equivalent_function(self):
        """A PrimFunc computing the template (with its best configuration on the device)."""
        if self._func is None:
            self._func = self.initialize_function()
        return self._func

    def initialize_function(self):
        raise NotImplementedError
