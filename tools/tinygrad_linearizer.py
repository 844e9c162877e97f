"""Record what tinygrad 0.9.1's get_linearizer does to matmuls whose output is an image, on the targets with tensor
cores: required_optimizations() first (the image's pixel upcast), then tensor cores, else the hand-coded opts.
Writes testdata/linearizer.json: the format of testdata/kernels.json plus each case's `optimized` state
(testdata/README.md).

Run it under your own tinygrad 0.9.1 install (`pip install tinygrad==0.9.1` in an environment of its own; the project
never imports tinygrad, and nothing of the project imports this script):

    python tools/tinygrad_linearizer.py testdata/linearizer.json
"""

from __future__ import annotations

import json
import sys

from tinygrad.codegen.kernel import KernelOptError, Opt, OptOps
from tinygrad.codegen.linearizer import Linearizer
from tinygrad.dtype import ImageDType, dtypes
from tinygrad.engine.realize import get_linearizer
from tinygrad.ops import BinaryOps, BufferOps, LazyOp, MemBuffer, ReduceOps, UnaryOps
from tinygrad.renderer.cstyle import CUDARenderer, MetalRenderer
from tinygrad.shape.shapetracker import ShapeTracker

metal = MetalRenderer()
metal.tensor_cores = MetalRenderer.tensor_cores  # as the corpus's metal target: tensor cores on, whatever the machine
TARGETS = {"metal": metal, "cuda": CUDARenderer("sm_80")}


def matmul(m: int, n: int, k: int, dtype_in, acc, image) -> tuple[LazyOp, ...]:
    """out = a @ b, the products cast to acc (where it differs) before the sum, stored into image((m*n/4 pixels))."""
    a = ShapeTracker.from_shape((m, k)).reshape((m, 1, k)).expand((m, n, k))
    b = ShapeTracker.from_shape((k, n)).permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    product = LazyOp(BinaryOps.MUL, tuple(LazyOp(BufferOps.LOAD, (), MemBuffer(i, dtype_in, st)) for i, st in
                                          ((1, a), (2, b))))
    if acc != dtype_in:
        product = LazyOp(UnaryOps.CAST, (product,), acc)
    out = ShapeTracker.from_shape((m, n, 1))
    return (LazyOp(BufferOps.STORE, (LazyOp(ReduceOps.SUM, (product,), (2,)),), MemBuffer(0, image, out)),)


def dtype_json(d) -> str | dict:
    if isinstance(d, ImageDType):
        return {"image": "float" if d.name == "imagef" else "half", "shape": list(d.shape)}
    return d.name


def st_json(st) -> list[dict]:
    return [{"shape": list(v.shape), "strides": list(v.strides), "offset": v.offset,
             "mask": [list(x) for x in v.mask] if v.mask is not None else None} for v in st.views]


def lazyop_json(x: LazyOp) -> dict:
    d: dict = {"op": f"{type(x.op).__name__}.{x.op.name}"}
    if x.op in BufferOps:
        d["arg"] = {"idx": x.arg.idx, "dtype": dtype_json(x.arg.dtype), "st": st_json(x.arg.st)}
    elif x.arg is not None:
        d["arg"] = dtype_json(x.arg) if x.op is UnaryOps.CAST else list(x.arg)
    return d | ({"src": [lazyop_json(s) for s in x.src]} if x.src else {})


def state(k: Linearizer) -> dict:
    return {"full_shape": list(k.full_shape), "output_shape": list(k.output_shape), "colors": k.colors(),
            "first_reduce": k.first_reduce, "upcasted": k.upcasted, "local_dims": k.local_dims,
            "group_for_reduces": k.group_for_reduces, "applied_opts": [[o.op.name, o.axis, o.amt] for o in
            k.applied_opts], "sts": [st_json(st) for st in k.sts]}


def sequence(ast, renderer, opts: list[Opt]) -> list[dict]:
    """Each opt tried after the accepted ones before it, on a fresh kernel (a refused opt may leave tinygrad's
    kernel half-changed)."""
    accepted, steps = [], []
    for opt in opts:
        k = Linearizer(*ast, opts=renderer)
        for o in accepted:
            k.apply_opt(o)
        try:
            k.apply_opt(opt)
            accepted.append(opt)
            steps.append({"opt": [opt.op.name, opt.axis, opt.amt], "ok": True, "full_shape": list(k.full_shape),
                          "colors": k.colors()})
        except KernelOptError:
            steps.append({"opt": [opt.op.name, opt.axis, opt.amt], "ok": False})
    return steps


def case(name: str, target: str, ast) -> dict:
    renderer = TARGETS[target]
    init, hand, tc = (Linearizer(*ast, opts=renderer) for _ in range(3))
    hand.hand_coded_optimizations()
    used = tc.apply_tensor_cores(1)
    optimized = get_linearizer(renderer, ast)  # required_optimizations, then TC, else hand_coded_optimizations
    pixel_first = [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.TC, 0, 0)]  # what get_linearizer tries, as a sequence
    return {"name": name, "target": target, "ast": [lazyop_json(a) for a in ast], "init": state(init),
            "hand_coded": state(hand),
            "tensor_cores": state(tc) | {"used": used, "tensor_core": str(tc.tensor_core) if tc.tensor_core else None},
            "optimized": state(optimized) | {"used": optimized.tensor_core is not None},
            "sequences": [sequence(ast, renderer, pixel_first), sequence(ast, renderer, pixel_first[::-1])]}


def main(path: str) -> None:
    h, f = dtypes.half, dtypes.float
    cases = []
    for m, n, k in ((64, 64, 64), (32, 128, 64), (256, 256, 256)):
        for target, dtype_in, acc, image in (("metal", f, f, dtypes.imagef), ("metal", h, f, dtypes.imagef),
                                             ("metal", h, h, dtypes.imageh), ("cuda", h, f, dtypes.imagef)):
            ast = matmul(m, n, k, dtype_in, acc, image((m, n // 4, 4)))
            cases.append(case(f"image_matmul_{m}x{k}x{n}_{dtype_in.name}_{acc.name}", target, ast))
            print(f"{cases[-1]['name']:34s} {target:6s}", *(" ".join(f"{o}:{a}:{b}" for o, a, b in
                  cases[-1][s]["applied_opts"]) for s in ("tensor_cores", "optimized")), sep="  |  ")
    with open(path, "w") as fh:
        json.dump({"source": "tinygrad 0.9.1, recorded by kernel.py's developers with tools/tinygrad_linearizer.py "
                             "(get_linearizer on image-output matmuls)", "cases": cases}, fh)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "linearizer.json")
