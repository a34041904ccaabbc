"""Builds the demo's lane detector: an ONNX network constructed, not trained,
for the synthetic roads of ``edgebox.streams.synthetic_road``.

It has LaneATT's interface so the pipeline around it is the one users deploy:
``input`` FP32 [N, 3, 360, 640] (RGB in [0, 1]) -> ``predict_lanes`` FP32
[N, 2784, 77]. Per anchor: background and lane logits, start_y (start row as a
fraction of the 71 strips, from the bottom), start_x (fraction of the width),
length (in strips), then the lane's x in pixels on the 72 rows
y_i = 359 * (1 - i / 71). The 2784 anchors are LaneATT's: straight lines from
the left and right edges (72 origins x 6 angles each) and from the bottom
(128 origins x 15 angles).

What it computes, with ordinary operators (convolutions, pooling, TopK,
gathers, arithmetic) that ONNX Runtime and TensorRT both run:

1. Paint evidence: bright thin ridges in (R + G) / 2, measured against both
   sides at several widths (so a shadow's edge or the verge is not a line) and
   divided by the local brightness (so a dim frame scores like a bright one).
2. Per row, the strongest ridge peaks with sub-pixel positions, sampled at the
   row's exact height (on a shallow line, half a row is pixels along it).
3. Pass 1, per straight anchor: the peak that best fits the anchor nearby on
   each row, a weighted quadratic fit of their offsets refitted without
   outliers, and a score (paint the lane alone explains, less a little per
   claimed row without paint).
4. The road's geometry: on a flat road every lane is x = x_v + a (y - h) +
   b / (y - h), sharing the vanishing point and curvature term. Pairs of the
   likeliest pass-1 lanes propose one; the proposal most paint agrees with wins.
5. Pass 2: every anchor becomes a lane of that road with its own a, takes the
   paint close along it, refits a and is scored as in pass 1; length ends at
   the last row that saw paint.

Deterministic: the same code writes the same file.

    python scripts/lane_detector.py model_repository/lane_detector/1/model.onnx
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HEIGHT, WIDTH = 360, 640
ROWS = 72
STRIPS = ROWS - 1
LEFT_RIGHT_ANGLES = (58.0, 44.0, 34.0, 26.0, 19.0, 13.0)
BOTTOM_ANGLES = (165.0, 150.0, 141.0, 131.0, 120.0, 109.0, 100.0, 90.0, 80.0, 71.0, 60.0, 49.0,
                 39.0, 30.0, 15.0)
SIDE_ORIGINS = 72
BOTTOM_ORIGINS = 128
OPSET = 17

PEAKS_PER_ROW = 10
PEAK_FLOOR = 0.06
"""Ridge strength (contrast relative to local brightness) a peak needs."""
EMPTY_ROW_COST = 0.15
"""What a claimed row without paint costs, in rows of paint: dashes' gaps
cost less than their paint earns, a line through stray peaks does not."""
SCORE_AT_HALF = 2.0
"""Score (rows of paint, less the cost of empty rows) at which P(lane) = 0.5."""
SCORE_SLOPE = 1.5
PAINT_CONTRAST = 0.18
"""Ridge strength at which a peak is as likely paint as not."""
PAINT_SHARPNESS = 25.0
NEIGHBOURHOOD_PX = 8.0
"""How far across its anchor line a lane's paint is still taken, as a Gaussian width."""
INLIER_PX = 2.5
"""How far across the first fit a row's paint may lie and still count."""
FIT_PRIOR = (0.3, 0.3, 0.6)
"""Ridge on the quadratic's coefficients: with little paint, stay near the anchor."""
HORIZON_ROWS = (60, 240)
"""Rows searched for the horizon (the top sixth to two thirds of the image)."""
MIN_DEPTH_ROWS = 6.0
"""Paint this close to the horizon is too far to place a lane by."""
CURVATURE_PRIOR = 1e-5
"""Ridge on the curvature term b: with no paint to say otherwise, the road is straight."""
CENTRE_PRIOR = 1e-4
"""Ridge pulling the vanishing column to the image's centre when nothing fixes it."""
VANISHING_LANES = 4
"""Likely lanes that vote on the road's geometry, in pairs."""
VANISHING_INLIER_PX = 3.0
"""How far from a proposed geometry's lane a row's paint may lie and still vote for it."""
SLOPE_PRIOR = 1.0
"""Rows of paint a lane's pass-1 slope is worth when pass 2 refits it."""
LANE_NEIGHBOURHOOD_PX = 3.0
"""How far across a pass-2 lane its paint is taken, as a Gaussian width."""

def row_ys() -> np.ndarray:
    return (HEIGHT - 1) * (1 - np.arange(ROWS, dtype=np.float64) / STRIPS)


def anchors() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Anchor x on each of the 72 rows; whether the anchor exists there (side
    anchors start part-way up the image); and sin(angle), which turns a
    horizontal distance from the anchor into a distance across it."""
    ys = row_ys()
    xs, exists, across = [], [], []

    def add(x0: float, y0: float, angle_deg: float) -> None:
        slope = 1.0 / math.tan(math.radians(angle_deg))
        xs.append(x0 + (y0 - ys) * slope)
        exists.append(ys <= y0 + 1e-6)
        across.append(math.sin(math.radians(angle_deg)))

    for y_frac in np.linspace(1.0, 0.0, SIDE_ORIGINS, endpoint=False):
        for angle in LEFT_RIGHT_ANGLES:
            add(0.0, y_frac * (HEIGHT - 1), angle)
    for y_frac in np.linspace(1.0, 0.0, SIDE_ORIGINS, endpoint=False):
        for angle in LEFT_RIGHT_ANGLES:
            add(WIDTH - 1.0, y_frac * (HEIGHT - 1), 180.0 - angle)
    for x_frac in np.linspace(0.0, 1.0, BOTTOM_ORIGINS):
        for angle in BOTTOM_ANGLES:
            add(x_frac * (WIDTH - 1), HEIGHT - 1.0, angle)
    return np.array(xs, np.float32), np.array(exists, np.float32), np.array(across, np.float32)


class _Graph:
    """Just enough of a builder to write the network as readable steps."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0
        self.probes: dict[str, str] = {}

    def probe(self, label: str, name: str) -> str:
        """Remember an intermediate tensor, exposed as an output when debugging."""
        self.probes[label] = name
        return name

    def _name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, value, dtype=np.float32, hint: str = "c") -> str:
        name = self._name(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def op(self, op_type: str, *inputs: str, outputs: int = 1, **attrs) -> str | list[str]:
        names = [self._name(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, **attrs))
        return names[0] if outputs == 1 else names

    def add(self, a: str, b: str) -> str:
        return self.op("Add", a, b)

    def sub(self, a: str, b: str) -> str:
        return self.op("Sub", a, b)

    def mul(self, a: str, b: str) -> str:
        return self.op("Mul", a, b)

    def div(self, a: str, b: str) -> str:
        return self.op("Div", a, b)

    def scalar(self, value: float) -> str:
        return self.const(np.float32(value), hint="k")

    def reduce_sum(self, x: str, axis: int, keepdims: int = 0) -> str:
        return self.op("ReduceSum", x, self.const([axis], np.int64, "axes"), keepdims=keepdims)

    def gaussian(self, x: str, width: float) -> str:
        """exp(-(x / width)^2 / 2)"""
        scaled = self.div(x, self.scalar(width))
        return self.op("Exp", self.mul(self.mul(scaled, scaled), self.scalar(-0.5)))


def _box(width: int, centre: int, size: int) -> np.ndarray:
    kernel = np.zeros(size, np.float32)
    kernel[centre - width : centre + width + 1] = 1.0 / (2 * width + 1)
    return kernel


RIDGE_SCALES = ((0, 3, 1), (1, 5, 2), (3, 9, 3), (5, 14, 4), (8, 20, 5))
"""(centre half-width, distance to each side, side half-width) in pixels."""


def _paint_evidence(g: _Graph, image: str) -> str:
    """[N, 1, 360, 640] ridge strength relative to local brightness."""
    brightness = g.op("Conv", image, g.const(np.array([0.5, 0.5, 0.0]).reshape(1, 3, 1, 1)))
    blur = np.outer(_gauss1d(1.0, 2), _gauss1d(1.0, 2)).reshape(1, 1, 5, 5)
    brightness = g.op("Conv", brightness, g.const(blur), pads=[2, 2, 2, 2])

    reach = max(d + s for _, d, s in RIDGE_SCALES)
    size = 2 * reach + 1
    kernels = []
    for centre, distance, side in RIDGE_SCALES:
        kernels.append(_box(centre, reach, size))
        kernels.append(_box(side, reach - distance, size))
        kernels.append(_box(side, reach + distance, size))
    bank = g.const(np.stack(kernels).reshape(len(kernels), 1, 1, size))
    # Edge padding: beyond the border is more of the same, not a black frame
    # that would make the border itself look like a bright line.
    padded = g.op("Pad", brightness, g.const([0, 0, 0, reach, 0, 0, 0, reach], np.int64),
                  mode="edge")
    responses = g.op("Conv", padded, bank)
    ridges = []
    for k in range(len(RIDGE_SCALES)):
        centre, left, right = _slice3(g, responses, 3 * k)
        ridges.append(g.op("Min", g.sub(centre, left), g.sub(centre, right)))
    ridge = g.op("Relu", g.op("Max", *ridges))

    local = g.op("AveragePool", brightness, kernel_shape=[9, 41], pads=[4, 20, 4, 20],
                 count_include_pad=0)
    return g.div(ridge, g.add(local, g.scalar(0.08)))


def _slice3(g: _Graph, x: str, start: int) -> list[str]:
    return [
        g.op("Slice", x, g.const([start + i], np.int64), g.const([start + i + 1], np.int64),
             g.const([1], np.int64))
        for i in range(3)
    ]


def _gauss1d(sigma: float, radius: int) -> np.ndarray:
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    k = np.exp(-0.5 * (x / sigma) ** 2)
    return (k / k.sum()).astype(np.float32)


def _row_peaks(g: _Graph, evidence: str) -> tuple[str, str]:
    """Per row, up to PEAKS_PER_ROW (x, strength) ridge peaks: [N, 72, K] each."""
    evidence = g.op("MaxPool", evidence, kernel_shape=[3, 1], pads=[1, 0, 1, 0])
    ys = row_ys()
    below = np.floor(ys).astype(np.int64)
    above = np.minimum(below + 1, HEIGHT - 1)
    frac = (ys - below).astype(np.float32).reshape(1, 1, ROWS, 1)
    profile = g.add(
        g.mul(g.op("Gather", evidence, g.const(below, np.int64, "rows"), axis=2),
              g.const(1.0 - frac)),
        g.mul(g.op("Gather", evidence, g.const(above, np.int64, "rows"), axis=2),
              g.const(frac)),
    )  # [N,1,72,W], each row's profile at its exact height
    profile = g.op("Squeeze", profile, g.const([1], np.int64))  # [N,72,W]
    local_max = g.op("MaxPool", g.op("Unsqueeze", profile, g.const([1], np.int64)),
                     kernel_shape=[1, 9], pads=[0, 4, 0, 4])
    local_max = g.op("Squeeze", local_max, g.const([1], np.int64))
    is_peak = g.op("Cast", g.op("Equal", profile, local_max), to=TensorProto.FLOAT)
    strong = g.op("Cast", g.op("Greater", profile, g.scalar(PEAK_FLOOR)), to=TensorProto.FLOAT)
    candidates = g.mul(profile, g.mul(is_peak, strong))
    strength, index = g.op("TopK", candidates, g.const([PEAKS_PER_ROW], np.int64), axis=-1,
                           outputs=2)
    # From contrast to "this is paint", so a score counts rows of paint rather
    # than adding up contrast: a dashed lane's few bright rows outweigh many
    # rows of faint texture.
    paint = g.op("Sigmoid", g.mul(g.sub(strength, g.scalar(PAINT_CONTRAST)),
                                  g.scalar(PAINT_SHARPNESS)))
    paint = g.mul(paint, g.op("Cast", g.op("Greater", strength, g.scalar(0.0)),
                              to=TensorProto.FLOAT))

    def neighbour(delta: int) -> str:
        shifted = g.op("Clip", g.add(index, g.const(delta, np.int64)),
                       g.const(0, np.int64), g.const(WIDTH - 1, np.int64))
        return g.op("GatherElements", profile, shifted, axis=2)

    centre = g.op("GatherElements", profile, index, axis=2)
    left, right = neighbour(-1), neighbour(1)
    curvature = g.sub(g.add(left, right), g.mul(centre, g.scalar(2.0)))
    safe = g.op("Min", curvature, g.scalar(-1e-4))
    shift = g.op("Clip", g.div(g.mul(g.sub(left, right), g.scalar(0.5)), safe),
                 g.scalar(-0.5), g.scalar(0.5))
    x = g.add(g.op("Cast", index, to=TensorProto.FLOAT), shift)
    return x, paint


def _solve_quadratic_fit(g: _Graph, weight: str, offset: str, t: str) -> list[str]:
    """Coefficients (c0, c1, c2) of the weighted ridge regression of
    ``offset`` on (1, t, t^2) over the row axis; each [N, A]."""
    t2 = g.mul(t, t)
    powers = [None, t, t2, g.mul(t2, t), g.mul(t2, t2)]

    def wsum(values: str | None) -> str:
        return g.reduce_sum(weight if values is None else g.mul(weight, values), axis=-1)

    s = [wsum(p) for p in powers]
    wo = g.mul(weight, offset)
    r = [g.reduce_sum(wo, axis=-1), g.reduce_sum(g.mul(wo, t), axis=-1),
         g.reduce_sum(g.mul(wo, t2), axis=-1)]
    m = [[g.add(s[0], g.scalar(FIT_PRIOR[0])), s[1], s[2]],
         [s[1], g.add(s[2], g.scalar(FIT_PRIOR[1])), s[3]],
         [s[2], s[3], g.add(s[4], g.scalar(FIT_PRIOR[2]))]]

    def det2(a: str, b: str, c: str, d: str) -> str:
        return g.sub(g.mul(a, d), g.mul(b, c))

    cof = [[det2(m[(i + 1) % 3][(j + 1) % 3], m[(i + 1) % 3][(j + 2) % 3],
                 m[(i + 2) % 3][(j + 1) % 3], m[(i + 2) % 3][(j + 2) % 3])
            for j in range(3)] for i in range(3)]
    det = g.add(g.add(g.mul(m[0][0], cof[0][0]), g.mul(m[0][1], cof[0][1])),
                g.mul(m[0][2], cof[0][2]))
    # The matrix is symmetric, so the inverse is the cofactor matrix over det.
    return [
        g.div(g.add(g.add(g.mul(cof[i][0], r[0]), g.mul(cof[i][1], r[1])),
                    g.mul(cof[i][2], r[2])), det)
        for i in range(3)
    ]


def _evaluate_fit(g: _Graph, coefficients: list[str], t: str) -> str:
    c0, c1, c2 = (g.op("Unsqueeze", c, g.const([-1], np.int64)) for c in coefficients)
    return g.add(c0, g.mul(t, g.add(c1, g.mul(t, c2))))


def _associate(g: _Graph, peak_x: str, paint: str, line_x: str, across: str,
               width: float) -> tuple[str, str, str]:
    """Per anchor and row, the peak that best fits ``line_x`` nearby: its
    index among the row's peaks, its x, and how much it counts (paint times
    closeness across the line); [N, A, 72] each."""
    distance = g.mul(g.op("Abs", g.sub(peak_x, g.op("Unsqueeze", line_x, g.const([-1], np.int64)))),
                     across)  # [N,A,72,K]
    affinity = g.mul(paint, g.gaussian(distance, width))
    best = g.op("ArgMax", affinity, axis=-1, keepdims=1)
    expanded = g.op("Expand", peak_x, g.op("Shape", distance))
    x_seen = g.op("Squeeze", g.op("GatherElements", expanded, best, axis=3),
                  g.const([3], np.int64))
    weight = g.op("ReduceMax", affinity, axes=[-1], keepdims=0)
    return best, x_seen, weight


def _owned(g: _Graph, weight: str, best: str) -> str:
    """[N, A, 72]: the weight of the rows whose peak this anchor owns.

    Each peak of paint belongs to the lane that sees the most paint among
    those that use it. A line fanning out from a real lane's far end shares
    that lane's paint and loses it here, as do the lane's own near-duplicate
    anchors: what is left is the paint each lane alone explains."""
    one_hot = g.op("Cast", g.op("Equal", best, g.const(np.arange(PEAKS_PER_ROW), np.int64)),
                   to=TensorProto.FLOAT)  # [N,A,72,K]
    uses = g.mul(one_hot, g.op("Unsqueeze", g.op(
        "Cast", g.op("Greater", weight, g.scalar(0.05)), to=TensorProto.FLOAT),
        g.const([-1], np.int64)))
    lift = g.scalar(1000.0)
    paint_rows = g.add(g.reduce_sum(weight, axis=-1, keepdims=1), lift)  # [N,A,1]
    owner = g.op("ReduceMax", g.mul(uses, g.op("Unsqueeze", paint_rows, g.const([-1], np.int64))),
                 axes=[1], keepdims=1)  # [N,1,72,K]
    owner_of_mine = g.reduce_sum(g.mul(one_hot, owner), axis=-1)
    mine = g.op("Cast", g.op("GreaterOrEqual", paint_rows, owner_of_mine), to=TensorProto.FLOAT)
    return g.mul(weight, mine)


def _solve_vanishing(g: _Graph, w: str, x: str) -> tuple[str, str, str]:
    """Least-squares road geometry for groups of lanes: ``w`` and ``x`` are
    [N, G, M, 72] (G groups of M lanes); returns horizon, x_v and b, [N, G].

    For each horizon row on a grid, x_v and b follow from linear least
    squares with each lane's own slope eliminated; the horizon is the row
    that fits best. Paint seen above a candidate horizon rules it out."""
    horizons = np.arange(HORIZON_ROWS[0], HORIZON_ROWS[1], dtype=np.float32)
    t_np = row_ys()[None, :].astype(np.float32) - horizons[:, None]  # [H,72]
    ok_np = (t_np >= MIN_DEPTH_ROWS).astype(np.float32)
    t_np = np.where(ok_np > 0, t_np, 1.0).astype(np.float32)
    grid = (1, 1, len(horizons), 1, ROWS)
    unsq = g.const([2], np.int64)
    w = g.op("Unsqueeze", w, unsq)  # [N,G,1,M,72]
    x = g.op("Unsqueeze", x, unsq)
    t = g.const(t_np.reshape(grid))
    inv = g.const((1.0 / t_np).reshape(grid))
    ww = g.mul(w, g.const(ok_np.reshape(grid)))  # [N,G,H,M,72]

    def rsum(v: str) -> str:
        return g.reduce_sum(v, axis=-1)  # [N,G,H,M]

    wt = g.mul(ww, t)
    s_tt = g.add(rsum(g.mul(wt, t)), g.scalar(1e-3))
    s_t1 = rsum(wt)
    s_ti = rsum(g.mul(wt, inv))
    s_tx = rsum(g.mul(wt, x))

    def inner(wuv: str, s_tu: str, s_tv: str) -> str:
        per_lane = g.sub(rsum(wuv), g.div(g.mul(s_tu, s_tv), s_tt))
        return g.reduce_sum(per_lane, axis=-1)  # [N,G,H]

    wi = g.mul(ww, inv)
    wx = g.mul(ww, x)
    m11 = g.add(inner(ww, s_t1, s_t1), g.scalar(CENTRE_PRIOR))
    m12 = inner(wi, s_t1, s_ti)
    m22 = g.add(inner(g.mul(wi, inv), s_ti, s_ti), g.scalar(CURVATURE_PRIOR))
    b1 = g.add(inner(wx, s_t1, s_tx), g.scalar(CENTRE_PRIOR * (WIDTH - 1) / 2))
    b2 = inner(g.mul(wx, inv), s_ti, s_tx)
    c = inner(g.mul(wx, x), s_tx, s_tx)
    det = g.sub(g.mul(m11, m22), g.mul(m12, m12))
    x_v = g.div(g.sub(g.mul(m22, b1), g.mul(m12, b2)), det)
    bend = g.div(g.sub(g.mul(m11, b2), g.mul(m12, b1)), det)
    residual = g.sub(c, g.add(g.mul(x_v, b1), g.mul(bend, b2)))
    above = g.reduce_sum(g.reduce_sum(g.mul(w, g.const(1.0 - ok_np.reshape(grid))), axis=-1),
                         axis=-1)
    cost = g.add(residual, g.mul(above, g.scalar(100.0)))
    pick = g.op("ArgMin", cost, axis=2, keepdims=1)  # [N,G,1]

    def chosen(v: str) -> str:
        return g.op("Squeeze", g.op("GatherElements", v, pick, axis=2), g.const([2], np.int64))

    horizon = chosen(g.op("Expand", g.const(horizons.reshape(1, 1, -1)), g.op("Shape", cost)))
    return horizon, chosen(x_v), chosen(bend)


def _depth(g: _Graph, horizon: str) -> tuple[str, str]:
    """Each row's distance below ``horizon`` (at least MIN_DEPTH_ROWS), and
    whether it is far enough below to place a lane by (1.0 or 0.0)."""
    below_by = g.sub(g.const(row_ys().astype(np.float32)), horizon)
    depth = g.op("Max", below_by, g.scalar(MIN_DEPTH_ROWS))
    usable = g.op("Cast", g.op("Greater", below_by, g.scalar(MIN_DEPTH_ROWS)),
                  to=TensorProto.FLOAT)
    return depth, usable


def _lane_support(g: _Graph, w: str, x: str, horizon: str, x_v: str, bend: str) -> str:
    """[N, G, M, 72]: how far each lane's paint agrees with the geometry of
    its group, each lane taking its best slope; horizon, x_v and b are
    [N, G, 1, 1]."""
    depth, below = _depth(g, horizon)
    base = g.add(x_v, g.div(bend, depth))
    usable = g.mul(w, below)
    slope = _perspective_slope(g, usable, x, base, depth, g.scalar(0.0), 1e-3)
    miss = g.sub(x, g.add(base, g.mul(slope, depth)))
    return g.mul(usable, g.gaussian(miss, VANISHING_INLIER_PX))


def _vanishing_geometry(g: _Graph, logit: str, owned: str, x_seen: str
                        ) -> tuple[str, str, str]:
    """The road's horizon row, vanishing column and curvature term, [N, 1, 1]
    each, from the lanes most likely to be lanes.

    A lane on a flat road, seen by a level camera, is x = x_v + a (y - h) +
    b / (y - h): every lane shares the vanishing point (x_v, h) and the
    curvature term b, and differs only in a. Each pair of likely lanes
    proposes a geometry; the one most of their paint agrees with wins (a
    verge or a shadow's edge among them, or two twins of one lane that fix no
    point, lose the vote), and is refitted to the paint that agrees."""
    likely = g.op("Squeeze", logit, g.const([-1], np.int64))  # [N,A]
    _, top = g.op("TopK", likely, g.const([VANISHING_LANES], np.int64), axis=1,
                  outputs=2)  # [N,M]
    g.probe("vanishing_lanes", g.op("Cast", top, to=TensorProto.FLOAT))
    rows_of = g.op("Expand", g.op("Unsqueeze", top, g.const([-1], np.int64)),
                   g.const([1, 1, ROWS], np.int64))
    w = g.op("GatherElements", owned, rows_of, axis=1)  # [N,M,72]
    x = g.op("GatherElements", x_seen, rows_of, axis=1)

    pairs = np.array([(a, b) for a in range(VANISHING_LANES)
                      for b in range(a + 1, VANISHING_LANES)], np.int64)
    pairs_const = g.const(pairs, np.int64, "pairs")
    geometry = _solve_vanishing(g, g.op("Gather", w, pairs_const, axis=1),
                                g.op("Gather", x, pairs_const, axis=1))  # [N,P] each
    unsq = g.const([2, 3], np.int64)
    proposals = [g.op("Unsqueeze", v, unsq) for v in geometry]  # [N,P,1,1]
    every = g.const([1], np.int64)
    support = _lane_support(g, g.op("Unsqueeze", w, every), g.op("Unsqueeze", x, every),
                            *proposals)  # [N,P,M,72]
    votes = g.reduce_sum(g.reduce_sum(support, axis=-1), axis=-1)  # [N,P]
    winner = g.op("ArgMax", votes, axis=1, keepdims=1)  # [N,1]

    agreeing = g.op("Squeeze", g.op("GatherElements", support, g.op(
        "Expand", g.op("Unsqueeze", winner, g.const([-1, -2], np.int64)),
        g.const([1, 1, VANISHING_LANES, ROWS], np.int64)), axis=1), g.const([1], np.int64))
    refined = _solve_vanishing(g, g.op("Unsqueeze", agreeing, every),
                               g.op("Unsqueeze", x, every))  # [N,1] each
    return tuple(g.op("Unsqueeze", v, g.const([-1], np.int64)) for v in refined)


def _perspective_slope(g: _Graph, weight: str, x: str, base: str, depth: str,
                       prior_slope: str, prior: float) -> str:
    """[N, A, 1]: each lane's a in x = base + a * depth, by weighted least
    squares, pulled towards ``prior_slope`` when it saw little paint."""
    wd = g.mul(weight, depth)
    num = g.add(g.reduce_sum(g.mul(wd, g.sub(x, base)), axis=-1, keepdims=1),
                g.mul(prior_slope, g.scalar(prior)))
    den = g.add(g.reduce_sum(g.mul(wd, depth), axis=-1, keepdims=1), g.scalar(prior))
    return g.div(num, den)


def _lane_score(g: _Graph, lane_x: str, weight: str, owned: str) -> tuple[str, str, str]:
    """(lane logit, start row, length in rows), [N, A, 1] each.

    A lane is paint seen along it that no better lane claims, less a little
    for each row it claims without paint: dashes' gaps cost less than their
    paint earns, while a line drawn through a few stray peaks claims many
    empty rows."""
    row_index = g.const(np.arange(ROWS, dtype=np.float32), hint="row_index")
    inside = g.mul(g.op("Cast", g.op("GreaterOrEqual", lane_x, g.scalar(0.0)),
                        to=TensorProto.FLOAT),
                   g.op("Cast", g.op("LessOrEqual", lane_x, g.scalar(WIDTH - 1.0)),
                        to=TensorProto.FLOAT))
    big = g.scalar(float(ROWS))
    start = g.op("ReduceMin", g.add(g.mul(row_index, inside),
                                    g.mul(g.sub(g.scalar(1.0), inside), big)),
                 axes=[-1], keepdims=1)
    seen = g.op("Cast", g.op("Greater", weight, g.scalar(0.05)), to=TensorProto.FLOAT)
    last = g.op("ReduceMax", g.sub(g.mul(g.add(row_index, g.scalar(1.0)), seen), g.scalar(1.0)),
                axes=[-1], keepdims=1)
    length = g.op("Relu", g.add(g.sub(last, start), g.scalar(1.0)))
    claimed = g.mul(inside, g.mul(
        g.op("Cast", g.op("GreaterOrEqual", row_index, start), to=TensorProto.FLOAT),
        g.op("Cast", g.op("LessOrEqual", row_index, last), to=TensorProto.FLOAT)))
    own_paint = g.probe("own_paint", g.reduce_sum(owned, axis=-1, keepdims=1))
    unexplained = g.op("Relu", g.sub(g.reduce_sum(claimed, axis=-1, keepdims=1), own_paint))
    score = g.sub(own_paint, g.mul(unexplained, g.scalar(EMPTY_ROW_COST)))
    lane_logit = g.mul(g.sub(score, g.scalar(SCORE_AT_HALF)), g.scalar(SCORE_SLOPE))
    return lane_logit, g.op("Min", start, g.scalar(float(STRIPS))), length


def build_lane_detector(path: Path, probes: bool = False) -> Path:
    g = _Graph()
    anchor_x, anchor_exists, anchor_across = anchors()
    count = len(anchor_x)
    image = "input"

    peak_x, paint = _row_peaks(g, g.probe("evidence", _paint_evidence(g, image)))
    g.probe("peak_x", peak_x)
    g.probe("peak_paint", paint)
    unsq = g.const([1], np.int64)
    peak_x = g.op("Unsqueeze", peak_x, unsq)  # [N,1,72,K]
    paint = g.op("Unsqueeze", paint, unsq)

    # Pass 1: each straight anchor takes the paint near it and bends to fit it.
    anchor_rows = g.const(anchor_x, hint="anchor_rows")  # [A,72]
    across = g.const(anchor_across[:, None, None], hint="anchor_across")  # [A,1,1]
    best, x_seen, weight = _associate(g, peak_x, paint, anchor_rows, across, NEIGHBOURHOOD_PX)
    weight = g.mul(weight, g.const(anchor_exists, hint="anchor_exists"))
    offset = g.sub(x_seen, anchor_rows)
    t = g.const(np.arange(ROWS, dtype=np.float32) / 40.0, hint="t")
    first_fit = _evaluate_fit(g, _solve_quadratic_fit(g, weight, offset, t), t)
    residual = g.mul(g.op("Abs", g.sub(offset, first_fit)),
                     g.const(anchor_across[:, None], hint="anchor_across"))
    inlier_weight = g.mul(weight, g.gaussian(residual, INLIER_PX))
    owned = _owned(g, inlier_weight, best)
    fit = _evaluate_fit(g, _solve_quadratic_fit(g, inlier_weight, offset, t), t)
    first_logit, _, _ = _lane_score(g, g.add(anchor_rows, fit), inlier_weight, owned)

    # Pass 2: the likeliest lanes vote on the road's vanishing point and
    # curvature; every anchor becomes a lane of that road, takes the
    # paint along it and fits its one free parameter. A dash or two is then
    # enough to place a whole lane, and far paint cannot bend it.
    horizon, x_v, bend = _vanishing_geometry(g, first_logit, owned, x_seen)
    g.probe("horizon", horizon)
    g.probe("x_v", x_v)
    g.probe("bend", bend)
    # Rows at or above the horizon say nothing about a lane's slope.
    depth, below_horizon = _depth(g, horizon)  # [N,1,72]
    base = g.add(x_v, g.div(bend, depth))
    anchor_weight = g.mul(g.const(anchor_exists), below_horizon)
    anchor_slope = _perspective_slope(g, anchor_weight, anchor_rows, base, depth,
                                      g.scalar(0.0), 1e-3)
    slope = _perspective_slope(g, g.mul(inlier_weight, below_horizon), x_seen, base, depth,
                               anchor_slope, SLOPE_PRIOR)
    lane_x = g.add(base, g.mul(slope, depth))
    # Across the lane: its horizontal distance times the sine of its angle.
    dxdy = g.sub(slope, g.div(bend, g.mul(depth, depth)))
    lane_across = g.op("Reciprocal", g.op("Sqrt", g.add(g.mul(dxdy, dxdy), g.scalar(1.0))))
    lane_across = g.op("Unsqueeze", lane_across, g.const([-1], np.int64))
    best, x_seen, weight = _associate(g, peak_x, paint, lane_x, lane_across, LANE_NEIGHBOURHOOD_PX)
    weight = g.mul(weight, below_horizon)
    slope = _perspective_slope(g, weight, x_seen, base, depth, slope, SLOPE_PRIOR)
    lane_x = g.add(base, g.mul(slope, depth))
    g.probe("weight", weight)

    lane_logit, start, length = _lane_score(g, lane_x, weight, _owned(g, weight, best))
    background_logit = g.mul(lane_logit, g.scalar(0.0))
    start_x = g.div(
        g.op("GatherElements", lane_x, g.op("Cast", start, to=TensorProto.INT64), axis=2),
        g.scalar(float(WIDTH)),
    )
    start_y = g.div(start, g.scalar(float(STRIPS)))
    g.nodes.append(helper.make_node(
        "Concat", [background_logit, lane_logit, start_y, start_x, length, lane_x],
        ["predict_lanes"], axis=2,
    ))

    outputs = [helper.make_tensor_value_info("predict_lanes", TensorProto.FLOAT,
                                             ["N", count, 5 + ROWS])]
    if probes:
        for label, name in g.probes.items():
            g.nodes.append(helper.make_node("Identity", [name], [f"probe_{label}"]))
            outputs.append(helper.make_tensor_value_info(f"probe_{label}", TensorProto.FLOAT, None))
    graph = helper.make_graph(
        g.nodes, "lane_detector",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, HEIGHT, WIDTH])],
        outputs,
        g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="edgebox scripts/lane_detector.py")
    model.ir_version = 8
    if not probes:
        onnx.checker.check_model(model)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)
    return path


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "lane_detector.onnx")
    print(f"wrote {build_lane_detector(target)}")
