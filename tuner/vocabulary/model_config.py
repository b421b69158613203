"""A model folder's config.json: read, checked and turned into the `ModelConfig` the
engine is built from. Standard library only, so commands that only look at a model (a
preset export, a settings check) do not load torch.

Every size a config names is checked before anything is allocated from it: each against
a limit (LIMITS, well above any published MoE checkpoint: DeepSeek-V3 has 61 layers of
256 experts, hidden size 7,168 and a vocabulary of 129,280), the layer-expert pairs
against the largest arena (the engine keeps tables per pair), and the dense weights the
config describes against this machine's memory. A config over a limit is refused with the
key, its value and the limit, instead of growing the process until it fails.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import TunerError
from tuner.knobs import MAX_SLOTS
from tuner.vocabulary import inputs


@dataclass(frozen=True)
class Arch:
    """How one Hugging Face MoE architecture names and wires its tensors."""

    moe: str  # module holding the router and the experts, under model.layers.{l}.
    parts: tuple[str, str, str]  # names of the (gate, up, down) expert matrices
    experts_key: tuple[str, ...]  # config keys for the number of routed experts, first wins
    width_key: str  # config key: expert width
    qk_norm: str = ""  # "head": RMSNorm per head (Qwen3); "full": over the projection (OLMoE)
    norm_topk: bool | None = None  # None: the config's norm_topk_prob (default False)


# Published Qwen and OLMoE configs say num_experts; transformers 5 writes num_local_experts.
_EXPERTS = ("num_experts", "num_local_experts")
ARCHS: dict[str, Arch] = {
    "qwen3_moe": Arch("mlp", ("gate_proj", "up_proj", "down_proj"), _EXPERTS,
                      "moe_intermediate_size", qk_norm="head"),
    "qwen2_moe": Arch("mlp", ("gate_proj", "up_proj", "down_proj"), _EXPERTS,
                      "moe_intermediate_size"),
    "olmoe": Arch("mlp", ("gate_proj", "up_proj", "down_proj"), _EXPERTS,
                  "intermediate_size", qk_norm="full"),
    "mixtral": Arch("block_sparse_moe", ("w1", "w3", "w2"), ("num_local_experts",),
                    "intermediate_size", norm_topk=True),
}
SUPPORTED_ARCHS = tuple(ARCHS)
EXPERT_PARTS = ("gate", "up", "down")
FOLDER = ("a model folder holds a Hugging Face MoE checkpoint: config.json and its "
          "*.safetensors weights")

# The largest value each size of a config may have, by config key ("experts" and
# "expert_width" stand for the architecture's keys: num_experts or num_local_experts, and
# moe_intermediate_size or intermediate_size).
LIMITS = {
    "vocab_size": 1 << 21,
    "hidden_size": 1 << 16,
    "num_hidden_layers": 1024,
    "num_attention_heads": 1024,
    "num_key_value_heads": 1024,
    "head_dim": 1024,
    "experts": 1 << 16,
    "expert_width": 1 << 18,
}
# Layer-expert pairs: as many as the largest arena has slots.
MAX_PAIRS = MAX_SLOTS
DENSE_ITEMSIZE = 2  # bytes a dense weight takes at the least (16-bit checkpoints)


class ModelError(TunerError, ValueError):
    """A model folder that cannot be used. The message names the file, what is wrong with
    it and what is allowed: it is the one line a command prints."""


@dataclass(frozen=True)
class ModelConfig:
    arch: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    num_experts: int
    top_k: int
    expert_width: int
    rms_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    norm_topk_prob: bool = True
    clip_qkv: float | None = None

    @property
    def spec(self) -> Arch:
        return ARCHS[self.arch]

    def expert_key(self, layer: int, expert: int, part: str) -> str:
        """Tensor name of one expert matrix (part: gate, up or down)."""
        name = self.spec.parts[EXPERT_PARTS.index(part)]
        return f"model.layers.{layer}.{self.spec.moe}.experts.{expert}.{name}.weight"

    def router_key(self, layer: int) -> str:
        return f"model.layers.{layer}.{self.spec.moe}.gate.weight"

    @classmethod
    def from_hf(cls, cfg: dict) -> ModelConfig:
        """Raises ModelError naming the key that is wrong (the caller adds the file)."""
        arch = cfg.get("model_type", "?")
        if arch not in ARCHS:
            raise ModelError(f"model_type {arch!r} is not supported: it is not one of the MoE "
                             f"architectures {', '.join(SUPPORTED_ARCHS)}")
        spec = ARCHS[arch]
        step = cfg.get("decoder_sparse_step", 1)
        if cfg.get("mlp_only_layers") or step not in (None, 1):
            raise ModelError(f"{arch}: dense MLP layers (mlp_only_layers, decoder_sparse_step "
                             f"{step}) are not supported; every layer must be a MoE layer")
        experts_key = next((k for k in spec.experts_key if cfg.get(k)), None)
        if experts_key is None:
            raise ModelError(f"none of {', '.join(spec.experts_key)} is set: a {arch} MoE "
                             "config names its number of routed experts")
        try:
            return cls._from_keys(cfg, arch, spec, experts_key)
        except KeyError as err:
            raise ModelError(f"key {err.args[0]!r} is missing: a {arch} config has it") \
                from None

    @classmethod
    def _from_keys(cls, cfg: dict, arch: str, spec: Arch, experts_key: str) -> ModelConfig:
        sizes = {key: key for key in ("vocab_size", "hidden_size", "num_hidden_layers",
                                      "num_attention_heads")}
        sizes[spec.width_key] = "expert_width"
        sizes[experts_key] = "experts"
        sizes.update({k: k for k in ("num_key_value_heads", "head_dim")
                      if cfg.get(k) is not None})
        for key, limit in sizes.items():
            _whole(key, cfg[key], LIMITS[limit])
        experts = cfg[experts_key]
        _whole("num_experts_per_tok", cfg["num_experts_per_tok"], experts,
               f"{experts_key} ({experts})")
        heads = cfg["num_attention_heads"]
        rope_parameters = cfg.get("rope_parameters")
        rope = cfg.get("rope_theta") or (rope_parameters.get("rope_theta")
                                         if isinstance(rope_parameters, dict) else None)
        norm_topk = spec.norm_topk if spec.norm_topk is not None else \
            cfg.get("norm_topk_prob", False)
        mc = cls(
            arch=arch,
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            num_layers=cfg["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=cfg.get("num_key_value_heads") or heads,
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
            num_experts=experts,
            top_k=cfg["num_experts_per_tok"],
            expert_width=cfg[spec.width_key],
            rms_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=rope or 10_000.0,
            norm_topk_prob=bool(norm_topk),
            clip_qkv=cfg.get("clip_qkv"),
        )
        mc.check()
        return mc

    def check(self) -> None:
        """The rules between sizes; ModelError naming the keys and their values."""
        for key, value in (("rms_norm_eps", self.rms_eps), ("rope_theta", self.rope_theta),
                           ("clip_qkv", 1.0 if self.clip_qkv is None else self.clip_qkv)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not (
                    0 < value < float("inf")):
                raise ModelError(f"{key} = {value!r}: it must be a number > 0")
        if self.head_dim < 1:
            raise ModelError(f"hidden_size {self.hidden_size} over num_attention_heads "
                             f"{self.num_heads} leaves no head_dim; give head_dim")
        if self.num_heads % self.num_kv_heads:
            raise ModelError(f"num_attention_heads = {self.num_heads} is not a multiple of "
                             f"num_key_value_heads = {self.num_kv_heads}: each key/value head "
                             "serves a whole group of query heads")
        pairs = self.num_layers * self.num_experts
        if pairs > MAX_PAIRS:
            raise ModelError(f"num_hidden_layers {self.num_layers} x {self.num_experts} "
                             f"routed experts = {pairs:,} layer-expert pairs; allowed: at most "
                             f"{MAX_PAIRS:,}")

    def dense_weights(self) -> int:
        """How many dense weights (everything but the routed experts) the config describes,
        at the least: embeddings and LM head, and per layer attention, router and norms."""
        D, H, G, Dh = self.hidden_size, self.num_heads, self.num_kv_heads, self.head_dim
        layer = D * (H + 2 * G) * Dh + H * Dh * D + self.num_experts * D + 2 * D
        return 2 * self.vocab_size * D + self.num_layers * layer + D

    @classmethod
    def read(cls, folder: Path, raw: dict | None = None) -> ModelConfig:
        """The config of a model folder (`raw`: its config.json, when already read), whose
        dense weights must fit in this machine's memory: they are loaded whole."""
        raw = read_config(folder) if raw is None else raw
        try:
            mc = cls.from_hf(raw)
            need, have = mc.dense_weights() * DENSE_ITEMSIZE, memory_bytes()
            if need > have:
                raise ModelError(
                    f"its sizes describe {_gib(need)} of dense weights (embeddings, "
                    f"attention and routers at {DENSE_ITEMSIZE} bytes a weight), which are "
                    f"loaded whole; this machine has {_gib(have)} of memory")
            return mc
        except ModelError as err:
            raise ModelError(f"{Path(folder) / 'config.json'}: {err}") from None


def _whole(key: str, value: object, limit: int, limit_text: str = "") -> None:
    """ModelError unless `value` is a whole number from 1 to `limit`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise ModelError(f"{key} = {value!r}: it must be a whole number from 1 to "
                         f"{limit_text or f'{limit:,}'}")


def memory_bytes() -> int:
    """This machine's physical memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"


def read_config(folder: Path) -> dict:
    """The folder's config.json as a dict; ModelError naming the file when there is none or
    it is not a JSON object."""
    try:
        what = inputs.kind(folder)
        folder = Path(folder)
        path = folder / "config.json"
        there = what == "folder" and inputs.kind(path) == "file"
    except inputs.PathError as err:
        raise ModelError(f"{err}: {FOLDER}") from None
    if what != "folder":
        why = "does not exist" if what == "missing" else "is not a folder"
        raise ModelError(f"{folder} {why}: {FOLDER}")
    if not there:
        raise ModelError(f"{path} is missing: {FOLDER}")
    try:
        cfg = inputs.loads(inputs.read_bytes(path, inputs.MODEL_CONFIG))
    except inputs.PathError as err:
        raise ModelError(f"{err}: {FOLDER}") from None
    except (OSError, ValueError) as err:
        raise ModelError(f"{path} is not readable JSON ({err}): {FOLDER}") from None
    if not isinstance(cfg, dict):
        raise ModelError(f"{path} holds a JSON {type(cfg).__name__}, not an object: {FOLDER}")
    return cfg


