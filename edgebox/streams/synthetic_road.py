"""Synthetic road frames with known lanes: a camera source that needs no camera,
and the ground truth the lane pipeline's accuracy is measured against.

The road is a flat plane seen by a pinhole camera; lane lines are curves on it,
projected with perspective, so they converge towards a vanishing point, thin
with distance and bend with the road's curvature. Each frame draws its own
lane count, solid or dashed lines, white or yellow paint, worn markings,
asphalt texture, sensor noise, global and graded lighting and shadows across
the road. The ground truth is each line's centre, sampled on the 72 rows that
LaneATT-style models predict, up to the distance where markings are drawn:
dashed lines are continuous in the truth, as in TuSimple and CULane.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

LANE_ROWS = 72
"""Ground-truth rows: y_i = (height - 1) * (1 - i / 71), from the bottom up."""

_SUBPIXEL_BITS = 4
_CAMERA_HEIGHT_M = 1.5
_FAR_M = 50.0
"""Markings fade out this far ahead; the ground truth ends there too."""


@dataclass(frozen=True)
class RoadFrame:
    image: np.ndarray
    """(height, width, 3) uint8, BGR as OpenCV captures it."""
    lanes: tuple[np.ndarray, ...]
    """Per lane line, (K, 2) float32 (x, y) pixel points ordered bottom to top."""
    vanishing_point: tuple[float, float] = (float("nan"), float("nan"))
    """(x, y) pixel where the lines would meet on a straight road: the
    horizon's row and the camera's heading."""


@dataclass(frozen=True)
class _Line:
    lateral_m: float
    dashed: bool
    yellow: bool
    width_m: float
    dash_m: float
    period_m: float
    phase_m: float


@dataclass(frozen=True)
class _Scene:
    horizon: float
    """Horizon row as a fraction of the height."""
    vanishing_x: float
    """Vanishing point column as a fraction of the width."""
    focal: float
    """Focal length as a fraction of the width."""
    curvature: float
    """1/m; the lateral offset grows as curvature * z**2 / 2."""
    lines: tuple[_Line, ...]
    asphalt: float
    paint: float
    """How much of the paint colour shows through wear, 0..1."""
    gain: float
    gradient: tuple[float, float]
    noise: float
    shadows: int


def _draw_scene(rng: np.random.Generator) -> _Scene:
    lane_width = rng.uniform(3.3, 3.9)
    offset = rng.uniform(-0.45, 0.45) * lane_width / 2
    left = int(rng.integers(1, 3))
    right = int(rng.integers(1, 3))
    dash, period = ((3.0, 9.0), (4.0, 10.0))[int(rng.integers(0, 2))]
    lines = []
    for k in range(-left, right):
        ego_lane_edge = k in (-1, 0)
        dashed = bool(rng.random() < (0.5 if ego_lane_edge else 0.3))
        lines.append(
            _Line(
                lateral_m=(k + 0.5) * lane_width - offset,
                dashed=dashed,
                yellow=bool(k == -left and rng.random() < 0.4),
                width_m=rng.uniform(0.12, 0.2),
                dash_m=dash,
                period_m=period,
                phase_m=rng.uniform(0, period),
            )
        )
    return _Scene(
        horizon=rng.uniform(0.36, 0.46),
        vanishing_x=rng.uniform(0.42, 0.58),
        focal=rng.uniform(0.85, 1.05),
        curvature=rng.uniform(-0.0015, 0.0015),
        lines=tuple(lines),
        asphalt=rng.uniform(60, 125),
        paint=rng.uniform(0.65, 1.0),
        gain=rng.uniform(0.55, 1.3),
        gradient=(rng.uniform(-0.25, 0.25), rng.uniform(-0.2, 0.2)),
        noise=rng.uniform(2, 9),
        shadows=int(rng.integers(0, 4)),
    )


class _Camera:
    def __init__(self, scene: _Scene, width: int, height: int) -> None:
        self.width = width
        self.height = height
        self.f = scene.focal * width
        self.y_h = scene.horizon * height
        self.x_v = scene.vanishing_x * width
        self.curvature = scene.curvature
        self.near = self.f * _CAMERA_HEIGHT_M / (height - self.y_h)

    def row(self, z: np.ndarray) -> np.ndarray:
        return self.y_h + self.f * _CAMERA_HEIGHT_M / z

    def depth(self, y: np.ndarray) -> np.ndarray:
        return self.f * _CAMERA_HEIGHT_M / (y - self.y_h)

    def column(self, lateral: float | np.ndarray, z: np.ndarray) -> np.ndarray:
        return self.x_v + self.f * (lateral + self.curvature * z * z / 2) / z


def render_road(seed: int, width: int = 640, height: int = 360) -> RoadFrame:
    """One random road scene; the same seed gives the same frame."""
    rng = np.random.default_rng(seed)
    return _render(_draw_scene(rng), rng, width, height, travelled_m=0.0)


class SyntheticRoad:
    """A drive down a synthetic road: one scene whose dashes move past as the
    car travels, with curvature and lane position drifting slowly."""

    def __init__(
        self,
        seed: int = 0,
        width: int = 640,
        height: int = 360,
        speed_mps: float = 15.0,
        fps: float = 15.0,
    ) -> None:
        self._rng = np.random.default_rng(seed)
        self._scene = _draw_scene(self._rng)
        self._width = width
        self._height = height
        self._step_m = speed_mps / fps
        self._index = 0

    def next_frame(self) -> RoadFrame:
        t = self._index * self._step_m
        self._index += 1
        base = self._scene
        scene = _Scene(
            **{
                **base.__dict__,
                "curvature": base.curvature * math.cos(t / 90.0),
                "lines": tuple(
                    _Line(
                        **{**line.__dict__, "lateral_m": line.lateral_m + 0.3 * math.sin(t / 60.0)}
                    )
                    for line in base.lines
                ),
            }
        )
        return _render(scene, self._rng, self._width, self._height, travelled_m=t)


def _render(
    scene: _Scene, rng: np.random.Generator, width: int, height: int, travelled_m: float
) -> RoadFrame:
    camera = _Camera(scene, width, height)
    image = _background(scene, camera, rng)
    _paint_lines(image, scene, camera, travelled_m)
    truths = (_ground_truth(line, camera) for line in scene.lines)
    lanes = [truth for truth in truths if len(truth) >= 2]
    _light(image, scene, camera, rng)
    image += _sensor_noise(rng, image.shape) * scene.noise
    return RoadFrame(
        np.clip(image, 0, 255).astype(np.uint8), tuple(lanes), (camera.x_v, camera.y_h)
    )


_NOISE_BANKS: dict[tuple[int, ...], np.ndarray] = {}


def _sensor_noise(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Unit Gaussian noise: a window at a random offset into a fixed bank
    twice the frame's size, which costs a slice instead of a fresh draw of a
    million normals per frame."""
    height, width, channels = shape
    bank = _NOISE_BANKS.get(shape)
    if bank is None:
        bank = np.random.default_rng(0).standard_normal(
            (2 * height, 2 * width, channels), dtype=np.float32
        )
        _NOISE_BANKS[shape] = bank
    y, x = int(rng.integers(0, height)), int(rng.integers(0, width))
    return bank[y : y + height, x : x + width]


def _background(scene: _Scene, camera: _Camera, rng: np.random.Generator) -> np.ndarray:
    height, width = camera.height, camera.width
    image = np.empty((height, width, 3), np.float32)
    ys = np.arange(height, dtype=np.float32)[:, None]
    sky = np.clip((camera.y_h - ys) / max(camera.y_h, 1.0), 0, 1)
    image[..., 0] = 200 + 40 * sky
    image[..., 1] = 185 + 20 * sky
    image[..., 2] = 170 - 10 * sky

    horizon_row = math.ceil(camera.y_h + 1)
    rows = np.arange(horizon_row, height, dtype=np.float32)
    z = camera.depth(rows)[:, None]
    xs = np.arange(width, dtype=np.float32)[None, :]
    lateral = (xs - camera.x_v) * z / camera.f - camera.curvature * z * z / 2
    edges = [line.lateral_m for line in scene.lines]
    on_road = (lateral > min(edges) - 0.6) & (lateral < max(edges) + 0.6)

    blotches = cv2.resize(
        rng.normal(0, 1, (9, 16)).astype(np.float32),
        (width, height - horizon_row),
        interpolation=cv2.INTER_CUBIC,
    )
    asphalt = scene.asphalt + 12 * blotches
    verge = (
        np.stack([asphalt * 0.55, asphalt * 0.9, asphalt * 0.7], axis=-1) + 10 * blotches[..., None]
    )
    road = np.repeat(asphalt[..., None], 3, axis=-1)
    ground = np.where(on_road[..., None], road, verge)
    haze = np.clip(1.0 - (z - 40.0) / 60.0, 0.0, 1.0)[..., None]
    image[horizon_row:] = ground * haze + image[horizon_row:] * (1 - haze)
    return image


def _paint_lines(image: np.ndarray, scene: _Scene, camera: _Camera, travelled_m: float) -> None:
    """All markings in one blend: coverage (anti-aliased) and colour are drawn
    per line into two layers, then mixed into the road once."""
    coverage = np.zeros(image.shape[:2], np.uint8)
    colours = np.zeros(image.shape, np.uint8)
    scale = 1 << _SUBPIXEL_BITS
    for line in scene.lines:
        colour = (40, 195, 230) if line.yellow else (235, 235, 235)
        for z0, z1 in _dash_segments(line, camera.near * 0.9, _FAR_M, travelled_m):
            z = np.geomspace(z0, z1, max(2, int(4 * math.log(z1 / z0) * camera.f / 40) + 2))
            centre = camera.column(line.lateral_m, z)
            half = camera.f * line.width_m / 2 / z
            ys = camera.row(z)
            outline = np.concatenate(
                [np.stack([centre - half, ys], 1), np.stack([centre + half, ys], 1)[::-1]]
            )
            polygon = [np.round(outline * scale).astype(np.int32)]
            cv2.fillPoly(coverage, polygon, 255, cv2.LINE_AA, _SUBPIXEL_BITS)
            cv2.fillPoly(colours, polygon, colour, cv2.LINE_8, _SUBPIXEL_BITS)
            # Anti-aliased edges reach a pixel further than the solid fill.
            cv2.polylines(colours, polygon, True, colour, 2, cv2.LINE_8, _SUBPIXEL_BITS)
    top = max(0, int(camera.row(np.float32(_FAR_M))) - 2)
    ys = np.arange(top, image.shape[0], dtype=np.float32)
    depth = camera.depth(np.maximum(ys, camera.y_h + 1.5))
    fade = np.clip(1.0 - (depth - 40.0) / 60.0, 0.0, 1.0)[:, None, None]
    alpha = coverage[top:, :, None].astype(np.float32) * (scene.paint / 255.0) * fade
    road = image[top:]
    road += alpha * (colours[top:].astype(np.float32) - road)


def _dash_segments(
    line: _Line, near: float, far: float, travelled_m: float
) -> list[tuple[float, float]]:
    if not line.dashed:
        return [(near, far)]
    segments = []
    start = near - ((near + line.phase_m + travelled_m) % line.period_m)
    while start < far:
        z0, z1 = max(start, near), min(start + line.dash_m, far)
        if z1 > z0:
            segments.append((z0, z1))
        start += line.period_m
    return segments


def _ground_truth(line: _Line, camera: _Camera) -> np.ndarray:
    i = np.arange(LANE_ROWS, dtype=np.float32)
    ys = (camera.height - 1) * (1 - i / (LANE_ROWS - 1))
    ys = ys[ys > camera.row(np.float32(_FAR_M))]
    xs = camera.column(line.lateral_m, camera.depth(ys))
    inside = (xs >= 0) & (xs <= camera.width - 1)
    return np.stack([xs[inside], ys[inside]], 1).astype(np.float32)


def _light(image: np.ndarray, scene: _Scene, camera: _Camera, rng: np.random.Generator) -> None:
    height, width = camera.height, camera.width
    ys = np.linspace(-0.5, 0.5, height, dtype=np.float32)[:, None]
    xs = np.linspace(-0.5, 0.5, width, dtype=np.float32)[None, :]
    gain = scene.gain * (1 + scene.gradient[0] * xs + scene.gradient[1] * ys)
    shade = np.ones((height, width), np.float32)
    for _ in range(scene.shadows):
        top = rng.uniform(camera.y_h + 10, height - 20)
        bottom = min(height, top + rng.uniform(15, 80))
        x0 = rng.uniform(-0.2, 0.9) * width
        x1 = x0 + rng.uniform(0.2, 0.7) * width
        skew = rng.uniform(-60, 60)
        polygon = np.array([[x0, top], [x1, top], [x1 + skew, bottom], [x0 + skew, bottom]])
        cv2.fillPoly(shade, [np.round(polygon).astype(np.int32)], float(rng.uniform(0.45, 0.7)))
    shade = cv2.GaussianBlur(shade, (0, 0), 3)
    image *= (gain * shade)[..., None]
