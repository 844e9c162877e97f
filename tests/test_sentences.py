"""Every kind of sentence the demo prints, checked against the facts of the state it is about, over the space of
states.

The states: every demo kernel on every target, at each step of its heuristics and after random opt sequences drawn
from the search's actions (search.ACTIONS: the whole axis (amount 0), PADTO and UPCASTMID among them), NOLOCALS,
UPCASTMID on each axis, and a first TC with tc_opt 0, 1 and 2. The facts: the OpenCL C that runtime.render writes
(its loops, ids, index terms, vector and image accesses, guards and stores), the ShapeTracker (indices(), numpy, view
by view: not the symbolic algebra), and the colours. The default run takes SENTENCE_SEQUENCES=2 sequences per
kernel and target (about 700 states); set it higher (and SENTENCE_SEED) for a longer search of the space.
The tests over the states are marked `sweep` (`pytest -m sweep`); the few about one kernel are `spec`.
"""

from __future__ import annotations

import io
import itertools
import os
import random
import re
from dataclasses import dataclass

import pytest

import kernel
import demo as D
import render
from kernel import TARGETS, ConstBuffer, ImageDType, Kernel, KernelOptError, Opt, OptOps, optimize
from demo import DEMOS

R = pytest.importorskip("runtime")
np = pytest.importorskip("numpy")
search = pytest.importorskip("search.beam")

SEQUENCES = int(os.environ.get("SENTENCE_SEQUENCES", "2"))
SEED = int(os.environ.get("SENTENCE_SEED", "24"))


@pytest.fixture(autouse=True)
def _plain(monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")


@dataclass
class State:
    label: str
    k: Kernel
    opt: Opt | None = None  # the opt that made it, applied to `before`
    before: Kernel | None = None
    _src: str | None = None

    @property
    def src(self) -> str:
        if self._src is None:
            self._src = R.render(self.k).src
        return self._src


ACTIONS = search.ACTIONS + [Opt(OptOps.NOLOCALS)] + [Opt(OptOps.UPCASTMID, a, 4) for a in range(3)]


def _space() -> list[State]:
    """Each demo on each target: its heuristics' steps, its own opts' steps, then SEQUENCES random sequences of up to
    5 accepted opts, which start with GROUP:0:8 UPCASTMID:0:4 every other one; and on metal and cuda three more that
    start with a tensor core, TC:0:0, TC:0:1 and TC:0:2, where one fits."""
    rng, states = random.Random(SEED), []
    for (name, d), target in itertools.product(DEMOS.items(), TARGETS):
        k = Kernel(*d.build(), opts=TARGETS[target])
        states.append(State(f"{name}[{target}] start", k.copy()))
        for opt in optimize(k.copy()).applied_opts:
            before = k.copy()
            k.apply_opt(opt)
            states.append(State(f"{name}[{target}] heuristics {k.applied_opts}", k.copy(), opt, before))
        k = Kernel(*d.build(), opts=TARGETS[target])
        for opt in map(Opt.parse, d.opts):  # the demo's own opts
            before = k.copy()
            if _applies(k, opt):
                states.append(State(f"{name}[{target}] {' '.join(map(str, k.applied_opts))}", k.copy(), opt, before))
        starts = [[Opt(OptOps.GROUP, 0, 8), Opt(OptOps.UPCASTMID, 0, 4)] if n % 2 else [] for n in range(SEQUENCES)]
        starts += [[Opt(OptOps.TC, 0, tc_opt)] for tc_opt in range(3) if TARGETS[target].tensor_cores]
        for start in starts:
            k = Kernel(*d.build(), opts=TARGETS[target])
            if start and start[0].op is OptOps.TC and not _applies(k.copy(), start[0]):
                continue
            for opt in start + [rng.choice(ACTIONS) for _ in range(40)]:
                before = k.copy()
                try:
                    k.apply_opt(opt)
                except KernelOptError:
                    continue
                states.append(State(f"{name}[{target}] {' '.join(map(str, k.applied_opts))}", k.copy(), opt, before))
                if len(k.applied_opts) == 5:
                    break
    return states


def _applies(k: Kernel, opt: Opt) -> bool:
    try:
        k.apply_opt(opt)
    except KernelOptError:
        return False
    return True


STATES = _space()


@pytest.mark.sweep
def test_the_space_reaches_every_kind_of_opt_on_every_demo_and_target():
    made = {(s.opt.op, s.opt.amt == 0) for s in STATES if s.opt is not None}
    assert {op for op, _ in made} == set(OptOps) and (OptOps.UPCAST, True) in made and (OptOps.GROUP, True) in made
    assert {s.opt.amt for s in STATES if s.opt is not None and s.opt.op is OptOps.TC} == {0, 1, 2}
    assert {s.label.split()[0] for s in STATES} == {f"{n}[{t}]" for n in DEMOS for t in TARGETS}
    assert any("white" in s.k.colors() for s in STATES) and any(s.k.dont_use_locals for s in STATES)


# ---------------------------------------------------------------------------------------------------------------
# reading the rendered C
# ---------------------------------------------------------------------------------------------------------------


def c_to_python(expr: str) -> str:
    """A C int expression or condition as Python (the operands of / and % are never negative in an index)."""
    expr = expr.replace("&&", " and ").replace("||", " or ").replace("/", "//")
    return re.sub(r"!(?!=)", " not ", expr)


def split_args(text: str) -> list[str]:
    """The comma-separated arguments of a call whose text starts after its '('."""
    args, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                return args + [cur.strip()]
            depth -= 1
        if ch == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
        else:
            cur += ch
    raise ValueError(text)


def c_stores(src: str, ids: dict[str, int], buf: int, image_width: int | None = None) -> set[int]:
    """The positions of data<buf> the C writes when its ids (and variables) have these values: index definitions and
    guards (`if (...)` lines and blocks) evaluated; a float2/float4 store writes its width, write_imagef a pixel."""
    env, guards, written = dict(ids), [True], set()
    for line in src.split("\n"):
        code = re.sub(r"/\*.*?\*/", "", line).strip()
        if code.endswith("{"):  # nothing is stored inside a loop: its body is skipped
            cond = re.fullmatch(r"if \((.+)\) \{", code)
            live = guards[-1] and not code.startswith("for ")
            guards.append(live and (eval(c_to_python(cond.group(1)), {}, env) if cond else True))
            continue
        if not guards[-1] and code != "}":
            continue
        if m := re.fullmatch(r"int (idx\d+) = (.+);", code):
            env[m.group(1)] = eval(c_to_python(m.group(2)), {}, env)
            continue
        if code == "}":
            guards.pop()
            continue
        if m := re.fullmatch(r"if \((.+?)\) ((?:data|\*|write_imagef|vstore).*)", code):
            if not eval(c_to_python(m.group(1)), {}, env):
                continue
            code = m.group(2)
        if not guards[-1]:
            continue
        if m := re.match(rf"data{buf}\[(.+?)\] = ", code):
            written.add(eval(c_to_python(m.group(1)), {}, env))
        elif m := re.match(rf"\*\(\(__global float(\d)\*\)\(data{buf}\+", code):
            start = eval(c_to_python(split_args(code[m.end() :])[0]), {}, env)
            written.update(range(start, start + int(m.group(1))))
        elif m := re.match(r"vstore_half(\d?)\(", code):
            value, _, ptr = split_args(code[m.end() :])
            if ptr.startswith(f"data{buf}+"):
                start = eval(c_to_python(ptr[len(f"data{buf}+") :]), {}, env)
                written.update(range(start, start + int(m.group(1) or 1)))
        elif code.startswith(f"write_imagef(data{buf},"):
            coord = split_args(code[len("write_imagef(") :])[1]
            x, y = (eval(c_to_python(c), {}, env) for c in split_args(coord[len("(int2)(") :]))
            written.update(range((y * image_width + x) * 4, (y * image_width + x) * 4 + 4))
    return written


def c_index_terms(src: str, idx: int) -> list[str]:
    """The C index expressions through which buffer data<idx> is read or written, with `idxN` names put back."""
    defs = dict(re.findall(r"int (idx\d+) = (.+?);", src))
    uses = re.findall(rf"data{idx}\[([^\]]+)\]", src) + re.findall(rf"\(data{idx}\+([^)]*(?:\([^)]*\))*[^)]*)\)", src)
    return [re.sub(r"\bidx\d+\b", lambda m: f"({defs.get(m.group(0), m.group(0))})", u) for u in uses]


def c_ids(src: str, var_vals: dict[str, int] | None = None) -> dict[str, int]:
    """Each id of the C and its size: `int gidx0 = ...;  /* blue, axis 0: 0 <= gidx0 < 64 */` (a symbolic size at
    var_vals, the values of its variables)."""
    found = re.findall(r"int ([gl]idx\d+) = .*?: 0 <= \1 < (\S+) \*/", src)
    return {v: eval(c_to_python(n), {}, dict(var_vals)) if var_vals is not None else n for v, n in found}


def id_samples(sizes: dict[str, int], rng: random.Random, n: int = 3) -> list[dict[str, int]]:
    """All ids at 0, all at their largest value, and n random assignments."""
    return [{v: 0 for v in sizes}, {v: s - 1 for v, s in sizes.items()}] + [
        {v: rng.randrange(s) for v, s in sizes.items()} for _ in range(n)
    ]


def plain_states():
    """The states whose sizes are numbers, with one output."""
    return [s for s in STATES if not s.k.vars and len(s.k.ast) == 1]


def image_width(k: Kernel) -> int | None:
    return k.bufs[0].dtype.shape[1] if isinstance(k.bufs[0].dtype, ImageDType) else None


# ---------------------------------------------------------------------------------------------------------------
# --explain: strides, the ? legend, and what the new axis means for each buffer
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.sweep
def test_every_stride_printed_is_the_step_between_neighbouring_elements_in_memory():
    """A stride `--explain` prints (real_strides) is, wherever both elements are valid, the difference of the buffer
    positions ShapeTracker.indices() gives two neighbours."""
    for s in STATES[::3]:
        values = {v: (v.min + v.max) // 2 for v in s.k.vars}
        for i, st in enumerate(s.k.sts):
            st = st.at_values(values) if values else st
            window = st.shrink(tuple((0, min(n, 3)) for n in st.shape))
            idx, valid = (np.asarray(x) for x in window.indices())
            for axis, stride in enumerate(s.k.sts[i].real_strides()):
                if stride is None or window.shape[axis] < 2 or not isinstance(stride, int):
                    continue
                lo = [slice(None)] * len(window.shape)
                hi = list(lo)
                lo[axis], hi[axis] = slice(0, -1), slice(1, None)
                both = valid[tuple(lo)] & valid[tuple(hi)]
                step = (idx[tuple(hi)] - idx[tuple(lo)])[both]
                assert (step == stride).all(), (s.label, i, axis, stride, set(step.tolist()))


@pytest.mark.sweep
def test_every_stride_on_a_thread_or_loop_axis_is_the_multiplier_in_the_rendered_c():
    """Each id (gidx, lidx) and loop (ridx) of the C multiplies into a buffer's index by the stride --explain prints
    for that axis (a bare id where the stride is 1)."""
    for s in STATES:
        names = {int(a): f"{p}{a}" for p, a in re.findall(r"int ([gl]idx)(\d+) = ", s.src)}
        names.update({int(a): f"ridx{a}" for a in re.findall(r"for \(int ridx(\d+) =", s.src)})
        for buf, st in zip(s.k.bufs, s.k.sts):
            if isinstance(buf, ConstBuffer) or isinstance(buf.dtype, ImageDType):
                continue
            terms = " ".join(c_index_terms(s.src, buf.idx))
            for axis, stride in enumerate(st.real_strides()):
                if axis not in names or stride in (None, 0) or not isinstance(stride, int) or not terms:
                    continue
                var = names[axis]
                want = rf"(?<![\w*]){var}(?![\w*])" if stride == 1 else rf"\b{var}\*{stride}\b"
                assert re.search(want, terms), (s.label, buf.idx, axis, stride, terms)


def explain_lines(s: State) -> list[str]:
    return D._explain(s.k, s.opt, "", (), [], s.before)


@pytest.mark.sweep
def test_the_unknown_stride_legend_is_printed_where_a_stride_is_unknown_and_says_why():
    """`?` is printed for a stride real_strides can't give (the legend says so at the start), and each is where the
    axis's index is in the buffer's validity condition or under a division or modulo of its index."""
    for s in STATES:
        if s.opt is not None:
            continue
        text = "\n".join(explain_lines(s))
        unknown = [(i, a) for i, st in enumerate(s.k.sts) for a, x in enumerate(st.real_strides()) if x is None]
        assert ("? = no single stride" in text) == bool(unknown), s.label
        for i, axis in unknown:
            idx, valid = s.k.sts[i].expr_idxs()
            var = f"idx{axis}"
            under = re.search(rf"\({re.escape(var)}\b[^()]*\)(//|%)|\b{var}\b", valid.render())
            divided = any(re.search(rf"\b{var}\b", x.render()) for x in _divisions(idx))
            assert under or divided, (s.label, i, axis, idx.render(), valid.render())


def _divisions(node) -> list:
    found = [node] if isinstance(node, (kernel.DivNode, kernel.ModNode)) else []
    for child in getattr(node, "nodes", []) + [x for x in (getattr(node, "a", None),) if x is not None]:
        found += _divisions(child)
    return found


def c_vector_widths(src: str, idx: int) -> set[int]:
    """The widths of the vector loads and stores of data<idx> in the C (float2/float4, half ones with vload_half)."""
    found = re.findall(rf"(?:float|half)(\d)\*\)\(data{idx}\+|_half(\d)\(.*?data{idx}\+", src)
    return {int(a or b) for a, b in found}


@pytest.mark.sweep
def test_a_vector_access_is_named_exactly_where_the_rendered_c_has_one():
    """vector_access (the fact behind "one float4 load" and "4 scalar loads (...)") against runtime.render: a buffer
    has a float2/float4 access in the C exactly when vector_access names an axis, of that width."""
    vectors = 0
    for s in STATES:
        for i, buf in enumerate(s.k.bufs):
            if isinstance(buf, ConstBuffer) or isinstance(buf.dtype, ImageDType):
                continue
            axis, why = D.vector_access(s.k, i)
            found = c_vector_widths(s.src, buf.idx)
            if axis is None:
                assert not found and why, (s.label, buf.idx, why)
            else:
                assert found == {s.k.sts[i].shape[axis]}, (s.label, buf.idx, axis, found)
                vectors += 1
    assert vectors >= 50


def notes_of(s: State) -> list[tuple[int, int, str]]:
    """(axis, buffer, note) of every axis_notes sentence of the state: the new axis's, as --explain prints them, and
    every register axis's."""
    names = [f"data{b.idx}" if not isinstance(b, ConstBuffer) else "const" for b in s.k.bufs]
    found = [
        (int(a), note) for a, note in re.findall(r"^      \w+ axis (\d+): (.*)$", "\n".join(explain_lines(s)), re.M)
    ]
    up = s.k.shape_len - s.k.upcasted
    found += [(a, note) for a in range(up, s.k.shape_len) for note in D.axis_notes(s.k, a, names)]
    return [(a, names.index(note.split(":")[0].split(" has ")[0]), note) for a, note in found]


@pytest.mark.sweep
def test_every_access_note_is_the_access_of_the_rendered_c():
    """ "one float4 load", "4 scalar loads (...)", "one RGBA pixel (read_imagef)", "each element's own RGBA pixel",
    and an image output "written as a plain buffer": each is what the C does with that buffer."""
    kinds = set()
    for s in STATES:
        for axis, i, note in notes_of(s):
            buf, idx = s.k.bufs[i], s.k.bufs[i].idx
            size = s.k.full_shape[axis]
            if m := re.search(r"one float(\d) (load|store)", note):
                assert c_vector_widths(s.src, idx) == {int(m.group(1))} == {size}, (s.label, note)
            elif re.search(r"\d+ scalar (load|store)s", note) and not isinstance(buf.dtype, ImageDType):
                assert not c_vector_widths(s.src, idx), (s.label, note)
            elif m := re.search(r"(read|write)_imagef", note):
                assert f"{m.group(0)}(data{idx}," in s.src, (s.label, note)
            elif "written as a plain buffer" in note:
                assert f"write_imagef(data{idx}," not in s.src and f"data{idx}[" in s.src, (s.label, note)
            else:
                continue
            kinds.add(note.split(", ")[-1].split(" (")[0].split(":")[0])
    assert {"one float4 load", "one float2 load", "one float4 store", "one RGBA pixel"} <= kinds, kinds


@pytest.mark.sweep
def test_every_thread_note_is_the_multiplier_of_its_id_in_the_rendered_c():
    """A cyan, white or green axis's note: "all N threads read the same element" where the id is in none of the
    buffer's index terms, "neighbouring threads read S apart" where it multiplies them by S. A note of a thread axis
    that is none of these fails: a sentence nothing checks could say anything."""
    checked = 0
    for s in STATES:
        ids = c_ids(s.src)
        for axis, i, note in notes_of(s):
            if s.k.colors()[axis] not in ("cyan", "white", "green"):
                continue  # a register axis's note: the tests above and below
            var, buf = f"lidx{axis}", s.k.bufs[i]
            same = "threads read the same element" in note or "threads write the same element" in note
            apart = re.search(r"neighbouring threads (?:read|write) (?:(\d+) apart|neighbouring elements)", note)
            finisher = "the thread that finishes the reduce writes all" in note
            assert same or apart or finisher, f"{s.label}: a thread note no test classifies: {note}"
            if var not in ids or re.search(rf"_imagef\(data{buf.idx},", s.src):  # (an image's pixel coordinates)
                continue
            terms = " ".join(c_index_terms(s.src, buf.idx))
            if same or finisher:  # the finisher writes at constants, its own id at 0
                assert not re.search(rf"\b{var}\b", terms), (s.label, note, terms)
            else:
                stride = int(apart.group(1) or 1)
                want = rf"(?<![\w*]){var}(?![\w*])" if stride == 1 else rf"\b{var}\*{stride}\b"
                assert re.search(want, terms), (s.label, note, terms)
            checked += 1
    assert checked >= 100


def c_offsets(src: str, idx: int) -> dict[str, set[int]]:
    """The C's accesses of data<idx> as {the index's text (idxN put back, no parentheses) but its constant term: the
    constants added to it}."""
    found: dict[str, set[int]] = {}
    for term in c_index_terms(src, idx):
        flat = re.sub(r"[() ]", "", term)
        m = re.fullmatch(r"(.*?)([+-]\d+)", flat) if not flat.isdigit() else re.fullmatch(r"()(\d+)", flat)
        base, const = (m.group(1), int(m.group(2))) if m else (flat, 0)
        found.setdefault(base, set()).add(const)
    return found


@pytest.mark.sweep
def test_every_register_note_is_the_accesses_of_the_rendered_c():
    """A register axis's "N accesses S apart, one per register": the C reads or writes the buffer at N indices S
    apart from one base; "has stride 0 here: one load serves all N": the C's distinct accesses of the buffer are at
    most the registers' count over N (unmasked, non-image buffers, numeric sizes)."""
    checked = 0
    for s in STATES:
        if s.k.vars:
            continue
        up = s.k.shape_len - s.k.upcasted
        combos = kernel.prod(s.k.full_shape[up:])
        for axis, i, note in notes_of(s):
            buf, st = s.k.bufs[i], s.k.sts[i]
            if axis < up:
                continue  # a thread axis's note: the test above
            kinds = (r": \d+ accesses \d+ apart, one per", r"has stride 0 here: one (?:load|store) serves all \d+")
            known = any(re.search(k, note) for k in kinds) or "neighbouring elements, " in note  # (the access test's)
            assert known, f"{s.label}: a register note no test classifies: {note}"
            if isinstance(buf.dtype, ImageDType) or any(v.mask is not None for v in st.views):
                continue
            offsets = c_offsets(s.src, buf.idx)
            if m := re.search(r": (\d+) accesses (\d+) apart, one per", note):
                n, stride = int(m.group(1)), int(m.group(2))
                runs = [c for cs in offsets.values() for c in cs if all(c + j * stride in cs for j in range(n))]
                assert runs, (s.label, note, offsets)
            elif m := re.search(r"has stride 0 here: one (?:load|store) serves all (\d+)", note):
                assert sum(map(len, offsets.values())) * int(m.group(1)) <= combos, (s.label, note, offsets)
            else:
                continue
            checked += 1
    assert checked >= 200


@pytest.mark.sweep
def test_every_group_note_names_the_steps_and_the_loop_of_the_rendered_c():
    """GROUP's and GROUPTOP's note on the reduce axis they split: which steps of the axis thread t takes (for
    GROUP t, t+N, ...: the threads' stride is the axis's own and the loop's N times it; for GROUPTOP runs of R:
    the loop's stride is the axis's own and the threads' R times it, as the ShapeTracker before says), and the loop
    left over it, ridxN with its steps and stride, as the C has it; or that no loop is left (the whole axis)."""
    kinds = set()
    for s in STATES:
        if s.opt is None or s.opt.op not in (OptOps.GROUP, OptOps.GROUPTOP):
            continue
        split = s.opt.real_axis(s.before)
        for axis, i, note in notes_of(s):
            if "threads take one step each of the whole axis" in note:
                red = [k.colors().count("red") for k in (s.k, s.before)]
                assert red[0] == red[1] - 1 == s.src.count("for (int ridx"), (s.label, note)
                assert s.before.full_shape[split] == s.k.full_shape[axis], (s.label, note)
                kinds.add("whole")
                continue
            m = re.search(
                r"takes (?:steps t, t\+(\d+), \.\.\.|its own run of (\d+) consecutive steps) of the (\d+)", note
            )
            if not m:
                continue
            loop = re.search(r"loop (ridx\d+): (\d+) steps (\S+) apart", note)
            assert loop and loop.group(1) == f"ridx{split + 1}", (s.label, note)
            assert re.search(rf"for \(int {loop.group(1)} = 0; {loop.group(1)} < {loop.group(2)};", s.src), s.label
            terms = " ".join(c_index_terms(s.src, s.k.bufs[i].idx))
            if loop.group(3) not in ("0", "?") and not isinstance(s.k.bufs[i].dtype, ImageDType):
                want = loop.group(1) if loop.group(3) == "1" else f"{loop.group(1)}*{loop.group(3)}"
                assert re.search(rf"\b{re.escape(want)}(?![\w*])", terms), (s.label, note, terms)
            own = s.before.sts[i].real_strides()[split]
            threads, loop_stride = s.k.sts[i].real_strides()[axis], s.k.sts[i].real_strides()[split + 1]
            if isinstance(own, int) and own and threads is not None and loop_stride is not None:
                if m.group(1):  # GROUP: t, t+N, ...
                    assert (threads, loop_stride) == (own, own * int(m.group(1))), (s.label, note)
                else:  # GROUPTOP: runs of R
                    assert (threads, loop_stride) == (own * int(m.group(2)), own), (s.label, note)
            assert int(m.group(3)) == s.before.full_shape[split]
            kinds.add(s.opt.op.name)
    assert kinds == {"whole", "GROUP", "GROUPTOP"}, kinds


# ---------------------------------------------------------------------------------------------------------------
# --loops is the C: the one description of the loop nest, render.py's own
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.sweep
def test_loops_prints_the_rendered_c_line_for_line_in_the_colour_each_line_names():
    """--loops (demo.c_listing) is render(k).src, every line of it, after a line naming the buffers (where they have
    names); a line whose comment names an axis's colour is drawn in that colour, and no other line is coloured."""
    for n, s in enumerate(STATES[:: max(1, len(STATES) // 150)]):
        names = [f"x{i}" for i in range(len(s.k.bufs))] if n % 2 else []
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("FORCE_COLOR", "1")
            mp.delenv("NO_COLOR", raising=False)
            lines = D.c_listing(s.k, names)
        if names:
            said, lines = kernel.ansistrip(lines[0]), lines[1:]
            assert said.startswith("  (data0 is x0") and "data0 is data0" not in said, (s.label, said)
        assert [kernel.ansistrip(x)[2:] for x in lines] == R.render(s.k).src.rstrip().split("\n"), s.label
        for line in lines:
            named = re.search(r"/\* (\w+), axis \d+", line)
            colours = "black red green yellow blue magenta cyan white".split()
            code = 30 + colours.index(named.group(1).lower()) if named else 0
            code += 60 * bool(named and named.group(1).isupper())
            assert line.startswith(f"\x1b[{code}m") if named else "\x1b" not in line, (s.label, line)


# ---------------------------------------------------------------------------------------------------------------
# --map against the C and the ShapeTracker
# ---------------------------------------------------------------------------------------------------------------


def map_cells(lines: list[str]) -> dict[int, dict[str, list[int]]]:
    """The cells --map prints: flat output index -> {letter: its numbers}, read off the printed grid."""
    title, header = lines[0], lines[1]
    starts = [m.start() for m in re.finditer(r"\d+", header)]
    width = starts[1] - starts[0] if len(starts) > 1 else 1 << 30
    one_axis = "[row + column]" in title
    columns = int(m.group(1)) if (m := re.search(r"of shape \((?:\d+, )*(\d+)\)", title)) else None
    cells = {}
    for r, line in enumerate(x for x in lines[2:] if re.match(r"\s+\d+  ", x)):
        head = int(line.split()[0])
        for c, start in enumerate(starts):
            label = line[start : start + width].strip()
            if not label:
                continue
            flat = head + c if one_axis else r * columns + c
            cells[flat] = {x[0]: [int(v) for v in x[1:].split(",")] for x in label.split()}
    return cells


@pytest.mark.sweep
def test_every_map_cell_is_written_by_its_work_group_thread_and_register_in_the_rendered_c():
    """--map's g and t of each output are the ids whose stores in the C write it (the green and white ids at 0: the
    first of them writes); its r numbers the yellow (then white) axes, and with g and t they give the output's
    position through the ShapeTracker. Every target, NOLOCALS, images, tensor cores. A kernel of one work-group (no
    blue axes) says so, and its C takes no work-group id."""
    checked, single = 0, 0
    for s in plain_states():
        lines = D.output_map(s.k, width=100)
        if lines[0].startswith("  ("):
            assert len(s.k.sts[0].views) > 1 or None in s.k.sts[0].real_strides(), s.label  # it says why not
            continue
        colors, st = s.k.colors(), s.k.sts[0]
        kept = [a for a in range(s.k.shape_len) if st.shape[a] != 1]
        axes = {
            "g": [a for a in kept if colors[a] in ("blue", "BLUE")],
            "t": [a for a in kept if colors[a] == "cyan"],
            "r": [a for a in kept if colors[a] == "yellow"] + [a for a in kept if colors[a] == "white"],
        }
        group = range(s.k.first_reduce, s.k.first_reduce + s.k.group_for_reduces)
        fn = "get_group_id" if "g = work-group" in "\n".join(lines) else "get_global_id"  # g: a work-group or a thread
        if "(no blue axes: one work-group)" in "\n".join(lines):  # then the C has no work-group id to take
            assert "blue" not in colors and "get_group_id" not in s.src, s.label
            single += 1
        assert all(fn in x for x in re.findall(r"int gidx\d+ = .*", s.src)), (s.label, fn)
        if m := re.search(r"\((get_\w+)\(0\) is the last blue axis\)", "\n".join(lines)):
            assert m.group(1) == fn and re.search(rf"int gidx{axes['g'][-1]} = [^;]*{fn}\(0\)", s.src), s.label
        cells = map_cells(lines)
        by_thread: dict[tuple, set[int]] = {}
        for flat, cell in cells.items():
            values = {a: v for letter in "gtr" for a, v in zip(axes[letter], cell.get(letter, [])) if a in kept}
            idx, valid = st.expr_idxs([kernel.NumNode(values.get(a, 0)) for a in range(s.k.shape_len)])
            assert (idx.b, valid.b) == (flat, 1), (s.label, flat, cell)
            by_thread.setdefault((tuple(cell.get("g", [])), tuple(cell.get("t", []))), set()).add(flat)
        for (g, t), flats in by_thread.items():
            ids = {f"gidx{a}": v for a, v in zip(axes["g"], g)} | {f"lidx{a}": v for a, v in zip(axes["t"], t)}
            ids |= {f"lidx{a}": 0 for a in group}
            assert c_stores(s.src, ids, s.k.bufs[0].idx, image_width(s.k)) & set(cells) == flats, (s.label, g, t)
            checked += 1
    assert checked >= 1000 and single > 0


# ---------------------------------------------------------------------------------------------------------------
# the README's general statements, on every state
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.sweep
def test_the_colours_come_in_the_order_the_readme_says():
    """Left to right in the table's order (blue or BLUE, cyan, green and white, red), the registers (yellow and
    magenta) last, in the order their opts were applied."""
    rank = {"blue": 0, "BLUE": 0, "cyan": 1, "green": 2, "white": 2, "red": 3, "magenta": 4, "yellow": 4}
    for s in STATES:
        ranks = [rank[c] for c in s.k.colors()]
        assert ranks == sorted(ranks), (s.label, s.k.colors())
    k = Kernel(*DEMOS["upcastmid"].build())  # green and white mix: why the README says so
    for opt in ("GROUP:0:8", "UPCASTMID:0:4", "GROUP:0:2"):
        k.apply_opt(Opt.parse(opt))
    assert k.colors() == ["blue", "green", "white", "green", "red"]
    readme = " ".join(open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read().split())
    assert "but green and white axes mix in the order their opts were applied" in readme


@pytest.mark.sweep
def test_every_opt_but_nolocals_and_padto_splits_an_axis_as_the_docstrings_say():
    """OptOps' docstring: each opt splits an axis and moves a piece of it, but NOLOCALS and PADTO, which split none."""
    for s in STATES:
        if s.opt is None or s.opt.op is OptOps.TC:
            continue
        shapes = [tuple(x.full_shape) for x in (s.before, s.k)]
        if s.opt.op in (OptOps.PADTO, OptOps.NOLOCALS):  # PADTO: one size grows; NOLOCALS: blue turns BLUE
            assert len(shapes[0]) == len(shapes[1]) and sum(a != b for a, b in zip(*shapes)) <= 1, s.label
            blue = "BLUE" in s.k.colors() or not s.k.global_dims
            assert s.opt.op is OptOps.PADTO or (shapes[0] == shapes[1] and blue), s.label
        else:  # split into (size/amt, amt), amt moved: more axes, or (the whole axis) the same axes in new places
            assert len(shapes[1]) > len(shapes[0]) or s.k.colors() != s.before.colors(), s.label
    doc = " ".join(kernel.OptOps.__doc__.split())
    assert "each splits an axis" in doc and "but for NOLOCALS" in doc and "PADTO" in doc
    readme = " ".join(open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read().split())
    assert "each optimization but NOLOCALS and PADTO splits an axis" in readme


# ---------------------------------------------------------------------------------------------------------------
# instances, and what the demo says by itself
# ---------------------------------------------------------------------------------------------------------------


def demo(name: str, view: str = "steps", *opts: str, **kw) -> str:
    out = io.StringIO()
    parsed = [Opt.parse(o) for o in opts] if opts else None
    D.demo_kernel(name, opts=parsed, out=out, view=view, width=1000, **kw)
    return out.getvalue()


def test_a_whole_axis_group_says_each_thread_takes_one_step_and_no_loop_is_left():
    """Item 2: GROUP:0:0 on sum_axis1's 256-long reduce has no reduce loop in the C; each thread adds one element."""
    for op in ("GROUP", "GROUPTOP"):
        out = demo("sum_axis1", "explain", f"{op}:0:0")
        assert f"the 256 threads take one step each of the whole axis ({op}: no loop is left over it)" in out
        assert "t+256" not in out and "consecutive" not in out
        k = Kernel(*DEMOS["sum_axis1"].build())
        k.apply_opt(Opt.parse(f"{op}:0:0"))
        assert "for (int ridx" not in R.render(k).src


def test_plain_text_gives_each_size_its_colours_letter_and_lists_the_letters():
    """Off a terminal every size of the step table carries its colour's letter (k.colors(), step by step), and the
    line after the table says what each letter it used is, in the legend's order."""
    for name in DEMOS:
        d, lines = DEMOS[name], demo(name).splitlines()
        k = Kernel(*d.build(), opts=TARGETS[d.target])
        opts = [Opt.parse(o) for o in d.opts] or optimize(k.copy()).applied_opts
        used = set()
        for opt, line in zip([None, *opts], lines[1:]):
            if opt is not None:
                k.apply_opt(opt)
            sizes = re.findall(r"(\d+|<[^>]*>)([a-zA-Z])(?=\s|$)", line)
            assert [(str(s), D.ROLES[c][0]) for s, c in zip(k.full_shape, k.colors())] == sizes[: k.shape_len]
            used |= set(k.colors())
        key = ", ".join(f"{D.ROLES[c][0]} {c}: {D.ROLES[c][1]}" for c in D.COLOR_LEGEND if c in used)
        assert lines[-1] == f"  ({key})", name


def test_the_step_table_says_how_an_unroll_or_group_counts_its_axis():
    """An opt whose axis counts from a reduce axis is named with the axis it acts on in the line above it."""
    out = demo("matvec", "steps", "GROUP:0:8", "UNROLL:0:4", "UPCAST:0:4")
    assert "(GROUP:0:8 is axis 1, UNROLL:0:4 is axis 1 of the line above: UNROLL counts axes from the first" in out
    k = Kernel(*DEMOS["matvec"].build())
    for opt, axis in (("GROUP:0:8", 1), ("UNROLL:0:4", 1)):
        assert Opt.parse(opt).real_axis(k) == axis
        k.apply_opt(Opt.parse(opt))
    assert "is axis" not in demo("matvec", "steps", "LOCAL:0:4", "UPCAST:0:4")


@pytest.mark.sweep
def test_last_view_rows_are_the_strides_the_heuristics_read_where_they_differ():
    """--explain's `last view` rows are st.views[-1].strides, printed exactly where they differ from the real
    strides, and the legend at the start says why they differ."""
    seen = 0
    for s in STATES:
        lines = explain_lines(s)
        rows = {x.split()[2]: x.split()[3:] for x in lines if x.startswith("    last view ")}
        for i, st in enumerate(s.k.sts):
            if not isinstance(s.k.bufs[i], kernel.MemBuffer):
                continue
            name = f"data{s.k.bufs[i].idx}"
            last, real = [D._txt(x) for x in st.views[-1].strides], [D._txt(x) for x in st.real_strides()]
            assert rows.get(name) == (last if last != real else None), (s.label, name)
            seen += last != real
        if s.opt is None and rows:
            assert any("which know neither its padding nor the views under it" in x for x in lines), s.label
    assert seen >= 20


def test_the_opts_the_heuristics_never_choose_each_have_a_demo():
    """PADTO, UPCASTMID and NOLOCALS appear under a demo's default opts, _upcast_masked_axes under the heuristics."""
    shown = {o.op for name in DEMOS for o in D.demo_kernel(name, out=io.StringIO())[0].applied_opts}
    assert {OptOps.PADTO, OptOps.UPCASTMID, OptOps.NOLOCALS} <= shown
    tuned, decisions = D.weighed(Kernel(*DEMOS["cat"].build()))
    record = D.record_steps(decisions, tuned.applied_opts)
    assert any(d.heuristic == "_upcast_masked_axes" and opts for d, opts in record)
    assert "small masked axis 1: upcast it whole" in demo("cat")


def test_every_step_table_reason_is_true_on_every_target():
    """The heuristics' reasons for every demo on every target (test_teaching checks the corpus on its own)."""
    from tests.test_teaching import _reason_holds

    for (name, d), target in itertools.product(DEMOS.items(), TARGETS):
        tuned, decisions = D.weighed(Kernel(*d.build(), opts=TARGETS[target]))
        state = Kernel(*d.build(), opts=TARGETS[target])
        for decision, opt in [(x, o) for x, opts in D.record_steps(decisions, tuned.applied_opts) for o in opts]:
            why = D.reason(decision, opt, state, D.buffer_names(state))
            assert _reason_holds(why, opt, state), (name, target, opt, why)
            state.apply_opt(opt)


def test_the_renderer_and_the_explanation_use_the_one_vector_rule(monkeypatch):
    """One rule, one place: the C's float2/float4 accesses and --explain's vector notes both follow
    render.vector_axis; with it saying "no vector" the C has none and --explain says scalars."""
    k = optimize(Kernel(*DEMOS["matmul"].build()))
    assert "float4" in R.render(k).src and "one float4 load" in demo("matmul", "explain")
    monkeypatch.setattr(render, "vector_axis", lambda k, i: (None, "the rule says no"))
    monkeypatch.setattr(D, "vector_axis", render.vector_axis)
    assert "float4" not in R.render(k).src and "float2" not in R.render(k).src
    out = demo("matmul", "explain")
    assert "one float4" not in out and "4 scalar loads (the rule says no)" in out
