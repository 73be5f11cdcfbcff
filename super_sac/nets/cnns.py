"""Image encoders: a small CNN for MinAtar's 10x10 grids, the Nature-DQN CNN for 84x84 Atari
frames, the DrQ / DrQ-v2 encoder for DeepMind Control pixels, an image + vector ("multimodal")
example, and :func:`compute_conv_output`.

Every encoder reads one image key (channels first, ``(B, C, H, W)``) from the observation
dict. Images stay ``uint8`` in the replay buffer and reach the encoder as ``uint8`` tensors on
the agent's device; :meth:`ImageEncoder.to_float` converts them there (``x * pixel_scale``), so
the host never holds a float copy of a batch.

Encoders are trained by the critic loss only (their parameters sit in the critic optimizer with
``encoder_lr``); the actor update reads detached features (see
:func:`super_sac.learning.online_actor_update`), as in SAC+AE / DrQ (Yarats et al. 2019, 2021).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import gin
import torch
import torch.nn.functional as F
from torch import nn

from super_sac.augmentations import center_crop
from super_sac.nets import Encoder, conv_weight_init, weight_init

IntPair = int | tuple[int, int]


def _pair(value: IntPair) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    height, width = value
    return int(height), int(width)


def compute_conv_output(
    input_shape: tuple[int, int],
    kernel_size: IntPair | None = None,
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    *,
    layers: Iterable[nn.Module] | None = None,
) -> tuple[int, int]:
    """Height and width after a convolution (or pooling) layer, or after a stack of them.

    One layer: ``out = floor((in + 2 padding - dilation (kernel - 1) - 1) / stride) + 1`` per
    dimension (the formula of :class:`torch.nn.Conv2d`). With ``layers``, the formula is applied
    through every :class:`~torch.nn.Conv2d`, :class:`~torch.nn.MaxPool2d` and
    :class:`~torch.nn.AvgPool2d` in order (other modules, e.g. activations, keep the size).

    :param input_shape: ``(height, width)`` of the input.
    :param kernel_size: kernel size of one layer (an int or a pair).
    :param stride: its stride.
    :param padding: its zero padding (integers only; "same"/"valid" strings are not handled).
    :param dilation: its dilation.
    :param layers: a sequence of modules to chain instead of one layer's spec.
    :return: ``(height, width)`` of the output.
    :raises ValueError: when neither or both of ``kernel_size`` and ``layers`` are given, or
        when the output would be empty.
    """
    if (kernel_size is None) == (layers is None):
        raise ValueError("compute_conv_output needs either kernel_size (one layer) or layers")
    if layers is not None:
        shape = (int(input_shape[0]), int(input_shape[1]))
        for layer in layers:
            if isinstance(layer, (nn.Conv2d, nn.MaxPool2d, nn.AvgPool2d)):
                dil = getattr(layer, "dilation", 1)
                shape = compute_conv_output(
                    shape, layer.kernel_size, layer.stride, layer.padding, dil
                )
        return shape
    out = []
    for size, k, s, p, d in zip(
        input_shape, _pair(kernel_size), _pair(stride), _pair(padding), _pair(dilation)
    ):
        out.append((int(size) + 2 * p - d * (k - 1) - 1) // s + 1)
    if min(out) < 1:
        raise ValueError(
            f"a {kernel_size} kernel with stride {stride} and padding {padding} leaves no output "
            f"for an input of {tuple(input_shape)}"
        )
    return out[0], out[1]


class ImageEncoder(Encoder):
    """Base class of encoders that read one channels-first image key of the observation dict.

    :param image_key: the observation key holding ``(B, C, H, W)`` images.
    :param pixel_scale: factor applied after the float conversion (``1/255`` for 8-bit pixels,
        ``1`` for MinAtar's 0/1 grids).
    """

    def __init__(self, image_key: str, pixel_scale: float) -> None:
        super().__init__()
        self.image_key = image_key
        self.pixel_scale = float(pixel_scale)

    def to_float(self, image: torch.Tensor) -> torch.Tensor:
        """``image.float() * pixel_scale``, done on whatever device the batch is on."""
        return image.float() * self.pixel_scale

    def image(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        """The image of ``obs_dict`` as a float tensor ``(B, C, H, W)``."""
        return self.to_float(self.raw_image(obs_dict))

    def raw_image(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        """The image of ``obs_dict`` as stored, ``(B, C, H, W)`` (an error names a missing key or
        a wrong rank)."""
        if self.image_key not in obs_dict:
            raise KeyError(
                f"{type(self).__name__} reads the observation key {self.image_key!r}, but the "
                f"observation has {sorted(obs_dict)}; pass image_key= to the encoder."
            )
        image = obs_dict[self.image_key]
        if image.dim() != 4:
            raise ValueError(
                f"{type(self).__name__} expects (B, C, H, W) images under {self.image_key!r}, "
                f"got shape {tuple(image.shape)}; wrap the env with ChannelsFirstWrapper"
            )
        return image


def _conv_trunk(
    in_channels: int, spec: Sequence[tuple[int, int, int]]
) -> tuple[nn.Sequential, list[nn.Conv2d]]:
    """Conv2d + ReLU layers from ``(out_channels, kernel, stride)`` triples."""
    convs, modules, channels = [], [], in_channels
    for out_channels, kernel, stride in spec:
        conv = nn.Conv2d(channels, out_channels, kernel_size=kernel, stride=stride)
        convs.append(conv)
        modules += [conv, nn.ReLU()]
        channels = out_channels
    return nn.Sequential(*modules), convs


@gin.configurable
class MinAtarEncoder(ImageEncoder):
    """A small CNN for MinAtar's ``(C, 10, 10)`` grids (Young & Tian 2019 use one 3x3 conv; this
    adds a 2x2 one): conv 16@3x3 -> conv 16@2x2 -> linear ``emb_dim``.

    :param channels: number of grid channels ``C`` (4 for breakout, 10 for seaquest, ...).
    :param emb_dim: width of the state vector.
    :param image_key: observation key of the grid.
    :param grid_size: ``(height, width)`` of the grid.
    :param pixel_scale: MinAtar's cells are 0/1, so no rescaling by default.
    """

    def __init__(
        self,
        channels: int,
        emb_dim: int = 50,
        image_key: str = "obs",
        grid_size: tuple[int, int] = (10, 10),
        pixel_scale: float = 1.0,
    ) -> None:
        super().__init__(image_key, pixel_scale)
        self._dim = int(emb_dim)
        self.convs, layers = _conv_trunk(channels, [(16, 3, 1), (16, 2, 1)])
        height, width = compute_conv_output(grid_size, layers=layers)
        self.fc = nn.Linear(16 * height * width, emb_dim)
        self.apply(weight_init)

    @property
    def embedding_dim(self) -> int:
        return self._dim

    def forward(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.fc(self.convs(self.image(obs_dict)).flatten(1))


@gin.configurable
class NatureEncoder(ImageEncoder):
    """The Nature-DQN CNN (Mnih et al. 2015) for stacks of 84x84 frames: conv 32@8x8 stride 4,
    conv 64@4x4 stride 2, conv 64@3x3 stride 1 (a 7x7x64 map for 84x84 input), then a ReLU
    linear layer of ``emb_dim`` units.

    :param channels: stacked frames (x colour channels), 4 for the usual grayscale stack.
    :param emb_dim: width of the state vector (512 in the paper).
    :param image_key: observation key of the frames.
    :param image_size: ``(height, width)`` of a frame.
    :param pixel_scale: ``1/255`` for 8-bit pixels.
    """

    def __init__(
        self,
        channels: int = 4,
        emb_dim: int = 512,
        image_key: str = "obs",
        image_size: tuple[int, int] = (84, 84),
        pixel_scale: float = 1.0 / 255.0,
    ) -> None:
        super().__init__(image_key, pixel_scale)
        self._dim = int(emb_dim)
        self.convs, layers = _conv_trunk(channels, [(32, 8, 4), (64, 4, 2), (64, 3, 1)])
        height, width = compute_conv_output(image_size, layers=layers)
        self.fc = nn.Linear(64 * height * width, emb_dim)
        self.apply(weight_init)

    @property
    def embedding_dim(self) -> int:
        return self._dim

    def forward(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        return F.relu(self.fc(self.convs(self.image(obs_dict)).flatten(1)))


@gin.configurable
class ImageAndStateEncoder(ImageEncoder):
    """Example multimodal encoder for ``{"image": (B, C, H, W) uint8, "state": (B, D) float}``
    observations (see :class:`super_sac.wrappers.ImageAndStateWrapper`): a MinAtar-sized CNN
    embeds the image, a linear layer embeds the vector, and a linear layer mixes both.

    Subclass it (or copy it) for your own observation dicts: the library only needs
    :attr:`embedding_dim` and :meth:`forward`.

    :param image_shape: ``(C, H, W)`` of the image.
    :param state_dim: width of the state vector.
    :param emb_dim: width of the joint state vector.
    :param image_key: observation key of the image.
    :param state_key: observation key of the vector.
    :param pixel_scale: ``1/255`` for 8-bit pixels.
    """

    def __init__(
        self,
        image_shape: tuple[int, int, int],
        state_dim: int,
        emb_dim: int = 64,
        image_key: str = "image",
        state_key: str = "state",
        pixel_scale: float = 1.0 / 255.0,
    ) -> None:
        super().__init__(image_key, pixel_scale)
        self._dim = int(emb_dim)
        self.state_key = state_key
        channels, height, width = image_shape
        self.convs, layers = _conv_trunk(channels, [(16, 3, 2), (16, 3, 1)])
        out_h, out_w = compute_conv_output((height, width), layers=layers)
        self.image_fc = nn.Linear(16 * out_h * out_w, emb_dim)
        self.state_fc = nn.Linear(state_dim, emb_dim)
        self.mix = nn.Linear(2 * emb_dim, emb_dim)
        self.apply(weight_init)

    @property
    def embedding_dim(self) -> int:
        return self._dim

    def forward(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        image = F.relu(self.image_fc(self.convs(self.image(obs_dict)).flatten(1)))
        state = F.relu(self.state_fc(obs_dict[self.state_key].float()))
        return self.mix(torch.cat((image, state), dim=-1))


def _fit_crop(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """The centre ``size`` window of images larger than the encoder was built for (RAD trains on
    random crops and acts on whole frames). :raises ValueError: for smaller images."""
    height, width = image.shape[-2:]
    if height < size[0] or width < size[1]:
        raise ValueError(
            f"images of {height}x{width} are smaller than the {size[0]}x{size[1]} the encoder "
            "was built for. Fix: build the encoder with image_size=(H, W) of the images it "
            "reads (DrQPixelEncoder.image_size; with RAD's RadAug crops: the rendered size "
            "minus RadAug.crop), or render larger frames (the DMC script's --image_size)."
        )
    return center_crop(image, size)


@gin.configurable
class DrQPixelEncoder(ImageEncoder):
    """The pixel encoder of DrQ and DrQ-v2 (Kostrikov, Yarats & Fergus 2020, "Image
    Augmentation Is All You Need"; Yarats et al. 2021, "Mastering Visual Continuous Control"),
    after SAC+AE (Yarats et al. 2019): four 3x3 convolutions of 32 channels with strides
    2, 1, 1, 1 and ReLUs, then ``tanh(LayerNorm(W h + b))`` of width ``emb_dim``.

    Pixels enter as ``x * pixel_scale + pixel_shift``, computed into a new tensor: by default
    ``x / 255 - 0.5`` (in ``[-0.5, 0.5]``), as DrQ-v2's code and the original super_sac feed
    them; DrQ's and RAD's code feed ``x / 255`` (in ``[0, 1]``: ``pixel_shift = 0``, which
    ``experiments/dmc/drqv1.gin`` and so ``rad.gin`` set). Images larger than ``image_size``
    (RAD, Laskin et al. 2020: trained on random crops of larger renders, acting on whole frames)
    are centre-cropped to ``image_size`` first; smaller ones are refused. The features are
    trained by the critic loss only (the library's actor update reads detached encoder
    features).

    Two layouts of the ``fc + LayerNorm + tanh`` head:

    - ``trunk=True`` (default; the original super_sac's design): the head belongs to this shared
      encoder, so actor and critics read the same ``emb_dim`` features, trained by the critic.
    - ``trunk=False`` (the papers' layout, used by ``experiments/dmc/drqv2.gin``, ``drqv1.gin``
      and ``rad.gin``): the encoder returns the flattened convolutional features
      (``32 * h * w``) and the actor and the critic each put their own head on them
      (``trunk_dim`` of the actor and critic classes; DrQ-v2's ``trunk``). The actor's head is
      trained by the actor loss on detached features, the critic's by the critic loss, and the
      critic's is Polyak-averaged with the critics. RAD's heads end at the LayerNorm, without
      the tanh (``trunk_tanh = False`` of the actor and critic classes, set by ``rad.gin``).

    :param channels: channels of the stacked frames (3 per RGB frame: 9 for three frames).
    :param emb_dim: width of the feature vector (DrQ / DrQ-v2: 50).
    :param image_key: observation key of the frames.
    :param image_size: ``(height, width)`` the encoder reads (an int for square images).
    :param pixel_scale: ``1/255`` for 8-bit pixels.
    :param pixel_shift: added after scaling (``-0.5`` centres 8-bit pixels on 0, DrQ-v2's and
        the original super_sac's; ``0`` keeps them in ``[0, 1]``, DrQ's and RAD's).
    :param trunk: end with the ``fc + LayerNorm + tanh`` head (``emb_dim`` features); ``False``
        returns the flattened convolutional features and ignores ``emb_dim``.
    :param conv_init: initialisation of the convolutions (see
        :func:`super_sac.nets.conv_weight_init`): ``"delta_orthogonal"`` (default; only the
        kernel centre non-zero: SAC+AE's, RAD's and the original super_sac's) or
        ``"orthogonal"`` (the whole kernel, ReLU gain: DrQ's and DrQ-v2's code, which
        ``experiments/dmc/drqv1.gin`` and ``drqv2.gin`` set). Linear layers are orthogonal
        either way.
    :raises ValueError: for an unknown ``conv_init``.
    """

    def __init__(
        self,
        channels: int = 9,
        emb_dim: int = 50,
        image_key: str = "obs",
        image_size: IntPair = (84, 84),
        pixel_scale: float = 1.0 / 255.0,
        pixel_shift: float = -0.5,
        trunk: bool = True,
        conv_init: str = "delta_orthogonal",
    ) -> None:
        init = conv_weight_init(conv_init)  # refuses an unknown name before building anything
        super().__init__(image_key, pixel_scale)
        self.image_size = _pair(image_size)
        self.conv_init = conv_init
        self.pixel_shift = float(pixel_shift)
        self.convs, layers = _conv_trunk(channels, [(32, 3, 2), (32, 3, 1), (32, 3, 1), (32, 3, 1)])
        height, width = compute_conv_output(self.image_size, layers=layers)
        conv_dim = 32 * height * width
        self.trunk = bool(trunk)
        self._dim = int(emb_dim) if self.trunk else conv_dim
        self.fc = nn.Linear(conv_dim, emb_dim) if self.trunk else None
        self.norm = nn.LayerNorm(emb_dim) if self.trunk else None
        self.apply(init)
        # NHWC convolutions: about 20% faster forward and backward on CPUs (oneDNN) at these
        # sizes; the features are the same
        self.convs.to(memory_format=torch.channels_last)

    @property
    def embedding_dim(self) -> int:
        return self._dim

    def image(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        """The (centre-cropped) image of ``obs_dict`` as ``x * pixel_scale + pixel_shift``, float32
        in channels-last memory (what the convolutions read).

        The stored image is laid out channels-last first (a uint8 copy, a quarter of a float
        one), then converted to float once, scaled and shifted in place in that new tensor; a
        float32 input, which the conversion would alias, is scaled into a new tensor instead and
        never written.
        """
        raw = self.raw_image(obs_dict)
        if tuple(raw.shape[-2:]) != self.image_size:
            raw = _fit_crop(raw, self.image_size)
        raw = raw.contiguous(memory_format=torch.channels_last)
        if raw.dtype == torch.float32:
            image = raw.mul(self.pixel_scale)
        else:
            image = raw.to(torch.float32).mul_(self.pixel_scale)
        if self.pixel_shift:  # a shift of 0 (DrQ's, RAD's) saves a pass over the batch
            image.add_(self.pixel_shift)
        return image

    def forward(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        features = self.convs(self.image(obs_dict)).flatten(1)
        if self.fc is None:
            return features
        return torch.tanh(self.norm(self.fc(features)))


@gin.configurable
class DMCPixelEncoder(DrQPixelEncoder):
    """:class:`DrQPixelEncoder` under the name and signature of the original super_sac's
    DeepMind Control script: ``DMCPixelEncoder(inp_shape, emb_dim)``.

    :param inp_shape: ``(channels, height, width)`` of the stacked frames.
    :param emb_dim: width of the feature vector.
    :param kwargs: further :class:`DrQPixelEncoder` settings.
    """

    def __init__(self, inp_shape: Sequence[int], emb_dim: int = 50, **kwargs: object) -> None:
        channels, height, width = (int(v) for v in inp_shape)
        super().__init__(channels, emb_dim, image_size=(height, width), **kwargs)


__all__ = [
    "DMCPixelEncoder",
    "DrQPixelEncoder",
    "ImageAndStateEncoder",
    "ImageEncoder",
    "MinAtarEncoder",
    "NatureEncoder",
    "compute_conv_output",
]
