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

What each anchor computes, with ordinary operators (convolutions, pooling,
TopK, gathers, arithmetic) that ONNX Runtime and TensorRT both run:

1. Paint evidence: bright thin ridges in (R + G) / 2, measured against both
   sides at several widths (so a shadow's edge or the verge is not a line) and
   divided by the local brightness (so a dim frame scores like a bright one).
2. Per row, the strongest ridge peaks with sub-pixel positions.
3. Per anchor and row, the peak that best fits the anchor line nearby.
4. A weighted, regularized quadratic fit of those peaks' offsets from the
   anchor, refitted without outliers; where paint is seen locally the
   smoothed observations win over the fit, which bridges dashes' gaps.
5. The score is how much paint agrees with the fitted lane; length ends at
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
    banded = g.op("MaxPool", evidence, kernel_shape=[5, 1], pads=[2, 0, 2, 0])
    rows = np.round(row_ys()).astype(np.int64)
    profile = g.op("Gather", banded, g.const(rows, np.int64, "rows"), axis=2)  # [N,1,72,W]
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


def build_lane_detector(path: Path, probes: bool = False) -> Path:
    g = _Graph()
    anchor_x, anchor_exists, anchor_across = anchors()
    count = len(anchor_x)
    image = "input"

    peak_x, peak_strength = _row_peaks(g, g.probe("evidence", _paint_evidence(g, image)))
    g.probe("peak_x", peak_x)
    g.probe("peak_strength", peak_strength)
    unsq = g.const([1], np.int64)
    peak_x = g.op("Unsqueeze", peak_x, unsq)  # [N,1,72,K]
    peak_strength = g.op("Unsqueeze", peak_strength, unsq)

    ax = g.const(anchor_x[:, :, None], hint="anchor_x")  # [A,72,1]
    across = g.const(anchor_across[:, None, None], hint="anchor_across")  # [A,1,1]
    distance = g.mul(g.op("Abs", g.sub(peak_x, ax)), across)  # [N,A,72,K]
    affinity = g.mul(peak_strength, g.gaussian(distance, NEIGHBOURHOOD_PX))
    best = g.op("ArgMax", affinity, axis=-1, keepdims=1)

    def pick(values: str) -> str:
        expanded = g.op("Expand", values, g.op("Shape", distance))
        return g.op("Squeeze", g.op("GatherElements", expanded, best, axis=3),
                    g.const([3], np.int64))

    x_seen = pick(peak_x)  # [N,A,72]
    weight = g.mul(g.op("ReduceMax", affinity, axes=[-1], keepdims=0),
                   g.const(anchor_exists, hint="anchor_exists"))
    anchor_rows = g.const(anchor_x, hint="anchor_rows")  # [A,72]
    offset = g.sub(x_seen, anchor_rows)
    t = g.const(np.arange(ROWS, dtype=np.float32) / 40.0, hint="t")

    first_fit = _evaluate_fit(g, _solve_quadratic_fit(g, weight, offset, t), t)
    residual = g.mul(g.op("Abs", g.sub(offset, first_fit)),
                     g.const(anchor_across[:, None], hint="anchor_across"))
    inlier_weight = g.mul(weight, g.gaussian(residual, INLIER_PX))
    fit = _evaluate_fit(g, _solve_quadratic_fit(g, inlier_weight, offset, t), t)

    # Where paint was seen nearby, trust it over the global fit.
    smooth = g.const(_gauss1d(1.2, 3).reshape(1, 1, 7))
    flat = g.const([-1, 1, ROWS], np.int64)
    restore = g.op("Shape", inlier_weight)
    local_w = g.op("Reshape", g.op("Conv", g.op("Reshape", inlier_weight, flat), smooth,
                                   pads=[3, 3]), restore)
    local_wo = g.op("Reshape", g.op("Conv", g.op("Reshape", g.mul(inlier_weight, offset), flat),
                                    smooth, pads=[3, 3]), restore)
    trust = g.scalar(0.15)
    blended = g.div(g.add(local_wo, g.mul(fit, trust)), g.add(local_w, trust))
    lane_x = g.add(anchor_rows, blended)  # [N,A,72]

    g.probe("weight", weight)
    g.probe("inlier_weight", inlier_weight)
    row_index = g.const(np.arange(ROWS, dtype=np.float32), hint="row_index")
    inside = g.mul(g.op("Cast", g.op("GreaterOrEqual", lane_x, g.scalar(0.0)),
                        to=TensorProto.FLOAT),
                   g.op("Cast", g.op("LessOrEqual", lane_x, g.scalar(WIDTH - 1.0)),
                        to=TensorProto.FLOAT))
    big = g.scalar(float(ROWS))
    start = g.op("ReduceMin", g.add(g.mul(row_index, inside), g.mul(g.sub(g.scalar(1.0), inside),
                                                                    big)),
                 axes=[-1], keepdims=1)
    seen = g.op("Cast", g.op("Greater", inlier_weight, g.scalar(0.05)), to=TensorProto.FLOAT)
    last = g.op("ReduceMax", g.sub(g.mul(g.add(row_index, g.scalar(1.0)), seen), g.scalar(1.0)),
                axes=[-1], keepdims=1)
    length = g.op("Relu", g.add(g.sub(last, start), g.scalar(1.0)))

    # A lane is paint seen along it, less a little for each row it claims
    # without paint: dashes' gaps cost less than their paint earns, while a
    # line drawn through a few stray peaks claims many empty rows.
    claimed = g.mul(inside, g.mul(
        g.op("Cast", g.op("GreaterOrEqual", row_index, start), to=TensorProto.FLOAT),
        g.op("Cast", g.op("LessOrEqual", row_index, last), to=TensorProto.FLOAT)))
    paint_rows = g.reduce_sum(inlier_weight, axis=-1, keepdims=1)  # [N,A,1]

    # Each peak of paint belongs to the best lane that uses it. A line fanning
    # out from a real lane's far end shares that lane's paint and loses it
    # here, as do the lane's own near-duplicate anchors: what is left is the
    # paint each lane alone explains.
    uses = g.mul(
        g.op("Cast", g.op("Equal", best, g.const(np.arange(PEAKS_PER_ROW), np.int64)),
             to=TensorProto.FLOAT),
        g.op("Unsqueeze", g.op("Cast", g.op("Greater", inlier_weight, g.scalar(0.05)),
                                to=TensorProto.FLOAT), g.const([-1], np.int64)),
    )  # [N,A,72,K]
    lift = g.scalar(1000.0)
    lifted = g.op("Unsqueeze", g.add(paint_rows, lift), g.const([-1], np.int64))  # [N,A,1,1]
    owner = g.op("ReduceMax", g.mul(uses, lifted), axes=[1], keepdims=1)  # [N,1,72,K]
    owner_of_mine = g.reduce_sum(g.mul(g.op("Cast", g.op("Equal", best, g.const(
        np.arange(PEAKS_PER_ROW), np.int64)), to=TensorProto.FLOAT), owner), axis=-1)
    mine = g.op("Cast", g.op("GreaterOrEqual", g.add(paint_rows, lift), owner_of_mine),
                to=TensorProto.FLOAT)  # [N,A,72]
    own_paint = g.reduce_sum(g.mul(inlier_weight, mine), axis=-1, keepdims=1)
    claimed_rows = g.reduce_sum(claimed, axis=-1, keepdims=1)
    unexplained = g.op("Relu", g.sub(claimed_rows, own_paint))
    g.probe("own_paint", own_paint)
    g.probe("unexplained", unexplained)
    score = g.sub(own_paint, g.mul(unexplained, g.scalar(EMPTY_ROW_COST)))
    lane_logit = g.mul(g.sub(score, g.scalar(SCORE_AT_HALF)), g.scalar(SCORE_SLOPE))
    background_logit = g.mul(lane_logit, g.scalar(0.0))
    start = g.op("Min", start, g.scalar(float(STRIPS)))
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
