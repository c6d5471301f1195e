"""Evaluates an ONNX model with numpy, node by node: an independent reference for the ops that
model:export writes, written from the ONNX operator specifications (opset 13) as plain loops
and einsums, in float64 so that its own rounding does not hide the exporter's errors.

    outputs = evaluate(onnx.load("m.onnx"), {"input": x})   # a list, in the graph's output order

An op the exporter does not write is an error (so a new op needs a reference here first).
"""
import math

import numpy as np
import onnx
from onnx import numpy_helper


def attributes(node):
    out = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def split_pads(pads, n):
    """ONNX pads {begin_1..begin_n, end_1..end_n} as a list of (begin, end)."""
    pads = list(pads) if pads else [0] * (2 * n)
    return [(pads[i], pads[i + n]) for i in range(n)]


def window_view(x, tap, dilation, stride, out):
    """The slice of x (N, C, spatial...) read by kernel tap `tap` for every output position."""
    index = [slice(None), slice(None)]
    for t, d, s, o in zip(tap, dilation, stride, out):
        index.append(slice(t * d, t * d + (o - 1) * s + 1, s))
    return x[tuple(index)]


def conv(x, w, b=None, group=1, strides=None, dilations=None, pads=None, kernel_shape=None, **_):
    n = x.ndim - 2
    kernel = w.shape[2:]
    strides, dilations = strides or [1] * n, dilations or [1] * n
    xp = np.pad(x, [(0, 0), (0, 0)] + split_pads(pads, n))
    out = [(xp.shape[2 + i] - ((kernel[i] - 1) * dilations[i] + 1)) // strides[i] + 1 for i in range(n)]
    batch, channels = x.shape[:2]
    m = w.shape[0]
    y = np.zeros((batch, group, m // group) + tuple(out))
    wg = w.reshape((group, m // group) + w.shape[1:])  # (g, m/g, c/g, kernel...)
    for tap in np.ndindex(*kernel):
        xs = window_view(xp, tap, dilations, strides, out)
        xs = xs.reshape((batch, group, channels // group) + tuple(out))
        y += np.einsum("ngc...,gmc->ngm...", xs, wg[(slice(None),) * 3 + tap])
    y = y.reshape((batch, m) + tuple(out))
    if b is not None:
        y += b.reshape((1, m) + (1,) * n)
    return y


def conv_transpose(x, w, b=None, group=1, strides=None, dilations=None, pads=None, output_padding=None,
                   kernel_shape=None, **_):
    """y[o * s + k * d - pad_begin] += x[o] * w[k], the input gradient of Conv."""
    n = x.ndim - 2
    kernel = w.shape[2:]
    strides, dilations = strides or [1] * n, dilations or [1] * n
    output_padding = output_padding or [0] * n
    pads = split_pads(pads, n)
    size = [x.shape[2 + i] for i in range(n)]
    full = [strides[i] * (size[i] - 1) + (kernel[i] - 1) * dilations[i] + 1 + output_padding[i] for i in range(n)]
    batch, channels = x.shape[:2]
    mg = w.shape[1]
    y = np.zeros((batch, group, mg) + tuple(full))
    xg = x.reshape((batch, group, channels // group) + tuple(size))
    wg = w.reshape((group, channels // group, mg) + tuple(kernel))
    for tap in np.ndindex(*kernel):
        part = np.einsum("ngc...,gcm->ngm...", xg, wg[(slice(None),) * 3 + tap])
        index = [slice(None)] * 3
        for t, d, s, o in zip(tap, dilations, strides, size):
            index.append(slice(t * d, t * d + (o - 1) * s + 1, s))
        y[tuple(index)] += part
    y = y.reshape((batch, group * mg) + tuple(full))
    index = [slice(None), slice(None)]
    for i in range(n):
        index.append(slice(pads[i][0], full[i] - pads[i][1]))
    y = y[tuple(index)]
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * n)
    return y


def pool(x, kind, kernel_shape, strides=None, pads=None, count_include_pad=0, **_):
    n = x.ndim - 2
    strides = strides or [1] * n
    pad = [(0, 0), (0, 0)] + split_pads(pads, n)
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, pad, constant_values=fill)
    out = [(xp.shape[2 + i] - kernel_shape[i]) // strides[i] + 1 for i in range(n)]
    ones = np.pad(np.ones((1, 1) + x.shape[2:]), pad)  # 1 where a window reads the input
    acc = np.full(x.shape[:2] + tuple(out), fill)
    count = np.zeros((1, 1) + tuple(out))
    for tap in np.ndindex(*kernel_shape):
        xs = window_view(xp, tap, [1] * n, strides, out)
        acc = np.maximum(acc, xs) if kind == "max" else acc + xs
        count += window_view(ones, tap, [1] * n, strides, out)
    if kind == "max":
        return acc
    return acc / (np.prod(kernel_shape) if count_include_pad else count)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def batch_norm(x, scale, bias, mean, var, epsilon=1e-5, **_):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    r = lambda v: v.reshape(shape)
    return (x - r(mean)) / np.sqrt(r(var) + epsilon) * r(scale) + r(bias)


def reshape(x, shape):
    shape = [x.shape[i] if d == 0 else int(d) for i, d in enumerate(shape)]
    return x.reshape(shape)


def pad(x, pads, value=None, mode="constant"):
    assert mode == "constant"
    n = x.ndim
    return np.pad(x, [(int(pads[i]), int(pads[i + n])) for i in range(n)],
                  constant_values=0.0 if value is None else value)


def slice_(x, starts, ends, axes=None, steps=None):
    index = [slice(None)] * x.ndim
    axes = range(len(starts)) if axes is None else axes
    for i, a in enumerate(axes):
        index[int(a)] = slice(int(starts[i]), int(ends[i]), 1 if steps is None else int(steps[i]))
    return x[tuple(index)]


def resize(x, roi, scales, mode="nearest", coordinate_transformation_mode="half_pixel",
           nearest_mode="round_prefer_floor", **_):
    """Resize by scales, one axis at a time (both modes below are separable)."""
    for a, s in enumerate(scales):
        if s == 1:
            continue
        n, out = x.shape[a], int(math.floor(x.shape[a] * s))
        o = np.arange(out)
        if mode == "nearest":
            assert coordinate_transformation_mode == "asymmetric" and nearest_mode == "floor"
            x = np.take(x, np.minimum(np.floor(o / s).astype(int), n - 1), axis=a)
        else:
            assert mode == "linear" and coordinate_transformation_mode == "half_pixel"
            p = np.clip((o + 0.5) / s - 0.5, 0, n - 1)  # out of range: the edge value
            lo = np.floor(p).astype(int)
            hi, t = np.minimum(lo + 1, n - 1), p - lo
            shape = [1] * x.ndim
            shape[a] = out
            t = t.reshape(shape)
            x = np.take(x, lo, axis=a) * (1 - t) + np.take(x, hi, axis=a) * t
    return x


erf = np.vectorize(math.erf)

CAST = {1: np.float64, 6: np.int32, 7: np.int64, 9: np.bool_}


def run_node(op, ins, a):
    x = ins[0]
    unary = {"Relu": lambda: np.maximum(x, 0), "Sigmoid": lambda: 1 / (1 + np.exp(-x)), "Tanh": lambda: np.tanh(x),
             "Sqrt": lambda: np.sqrt(x), "Reciprocal": lambda: 1 / x, "Identity": lambda: x, "Erf": lambda: erf(x),
             "Exp": lambda: np.exp(x), "Softplus": lambda: np.logaddexp(0, x), "Softsign": lambda: x / (1 + np.abs(x))}
    binary = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "MatMul": np.matmul}
    if op in unary:
        return unary[op]()
    if op in binary:
        return binary[op](x, ins[1])
    if op == "Max":
        return np.maximum.reduce(np.broadcast_arrays(*ins))
    if op == "Clip":
        return np.clip(x, ins[1], ins[2])
    if op == "HardSigmoid":
        return np.clip(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0, 1)
    if op == "Softmax":
        return softmax(x, a.get("axis", -1))
    if op == "LogSoftmax":
        m = x - x.max(axis=a.get("axis", -1), keepdims=True)
        return m - np.log(np.exp(m).sum(axis=a.get("axis", -1), keepdims=True))
    if op == "Elu":  # alpha (exp(x) - 1) for x < 0
        return np.where(x < 0, a.get("alpha", 1.0) * np.expm1(np.minimum(x, 0)), x)
    if op == "Selu":  # gamma (alpha (exp(x) - 1)) for x <= 0, gamma x beyond
        alpha, gamma = a.get("alpha", 1.67326319217681884765625), a.get("gamma", 1.05070102214813232421875)
        return gamma * np.where(x <= 0, alpha * np.expm1(np.minimum(x, 0)), x)
    if op == "LeakyRelu":
        return np.where(x < 0, a.get("alpha", 0.01) * x, x)
    if op == "Where":
        return np.where(x, ins[1], ins[2])
    if op == "Transpose":
        return np.transpose(x, a["perm"])
    if op == "Conv":
        return conv(*ins, **a)
    if op == "ConvTranspose":
        return conv_transpose(*ins, **a)
    if op == "MaxPool":
        return pool(x, "max", **a)
    if op == "AveragePool":
        return pool(x, "avg", **a)
    if op in ("ReduceMean", "ReduceMax"):
        f = np.mean if op == "ReduceMean" else np.max
        return f(x, axis=tuple(a["axes"]), keepdims=bool(a.get("keepdims", 1)))
    if op == "BatchNormalization":
        return batch_norm(*ins, **a)
    if op == "Flatten":
        axis = a.get("axis", 1)
        return x.reshape(int(np.prod(x.shape[:axis])), -1)
    if op == "Reshape":
        return reshape(x, ins[1])
    if op == "Concat":
        return np.concatenate(ins, axis=a["axis"])
    if op == "Pad":
        return pad(*ins, **a)
    if op == "Slice":
        return slice_(*ins)
    if op == "Resize":
        return resize(*ins, **a)
    if op == "Gather":
        return np.take(x, ins[1], axis=a.get("axis", 0))
    if op == "Unsqueeze":
        axes = sorted(int(a) % (x.ndim + len(ins[1])) for a in ins[1])
        return np.expand_dims(x, tuple(axes))
    if op == "Shape":
        return np.array(x.shape, dtype=np.int64)
    if op == "Expand":
        return np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(int(d) for d in ins[1]))).copy()
    if op == "Range":  # start, start + delta, ... below limit
        start, limit, delta = (int(v) for v in ins)
        return np.array(list(range(start, limit, delta)), dtype=np.int64)
    if op == "Greater":
        return np.greater(x, ins[1])
    if op == "Cast":
        return x.astype(CAST[a["to"]])
    raise NotImplementedError("the evaluator has no " + op)


def evaluate(model, feeds):
    values = {}
    for t in model.graph.initializer:
        v = numpy_helper.to_array(t)
        values[t.name] = v.astype(np.float64) if v.dtype == np.float32 else v
    for name, v in feeds.items():
        values[name] = v.astype(np.float64) if v.dtype == np.float32 else v
    values[""] = None  # an optional input left out
    for node in model.graph.node:
        ins = [values[n] for n in node.input]
        while ins and ins[-1] is None:  # trailing optional inputs
            ins.pop()
        values[node.output[0]] = run_node(node.op_type, ins, attributes(node))
    return [values[o.name] for o in model.graph.output]
