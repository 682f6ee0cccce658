"""What a compiled step spends its memory traffic on, read from XLA's optimized HLO text.

    census = hlo_census(compiled.as_text())
    print(format_census(census, top=15))

Every top-level instruction (the entry computation and the bodies of its loops, conditionals and
calls; never the inside of a fusion, which runs as one kernel) is put in one category: matrix
products (a dot or convolution, or a fusion holding one), random bits (the threefry hash or
XLA's RngBitGenerator, and their conversion to dropout masks), scatter, gather, reductions,
async copies (the TPU's prefetches), transposes and copies, elementwise fusions, collectives,
loops, and the rest. Its bytes are its operands' plus its outputs', from
the shapes printed in the HLO (the way XLA's own `bytes accessed` counts them); TPU compilations
also carry the compiler's estimated cycles per instruction, summed beside the bytes. This is a
census of where bytes go, not a timing: on a GPU a profile says where time goes.

Its HBM bytes are the part of them in HBM. A TPU compilation places arrays in on-chip memory
too: a layout ending `S(n)`, n > 0, names the memory space (memory space 0, printed without
`S`, is HBM; on v4 the big prefetched arrays sit in `S(3)`). XLA's `bytes accessed` counts an
operand read from on-chip memory as it counts one read from HBM; the HBM count leaves it out,
and counts an asynchronous copy or slice between the two once, at its HBM end. That is the
traffic the chip's HBM bandwidth bounds.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

_ITEMSIZE = {
    "pred": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "s4": 0.5, "u4": 0.5,
    "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
    "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16,
}  # fmt: skip
_ARRAY_RE = re.compile(r"\b([a-z]+[0-9]*[a-z0-9]*)\[([0-9,]*)\](\{[^}]*\})?")
_ON_CHIP_RE = re.compile(r"S\([1-9][0-9]*\)")  # a layout's memory space other than HBM
_HEADER_RE = re.compile(r"^(ENTRY\s+)?%(\S+)\s+\(.*\{\s*$")
_INSTR_RE = re.compile(r"^\s*(?:ROOT\s+)?%(\S+)\s+=\s+(.*)$")
_CALLS_RE = re.compile(r"\b(?:calls|body|condition|to_apply)=%([\w.\-]+)")
_BRANCHES_RE = re.compile(r"branch_computations=\{([^}]*)\}")
_OP_NAME_RE = re.compile(r'op_name="([^"]*)"')
_CYCLES_RE = re.compile(r'"estimated_cycles":"(\d+)"')
# No memory traffic of their own: names, views and bookkeeping.
_FREE = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
         "partition-id", "replica-id", "opt-barrier"}  # fmt: skip
_RANDOM_NAMES = ("threefry", "random_bits", "_bernoulli", "_uniform", "random_split",
                 "random_fold_in")  # fmt: skip
_COLLECTIVES = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all",
                "collective-permute")  # fmt: skip
_ELEMENTWISE = {"add", "subtract", "multiply", "divide", "negate", "select", "compare", "and",
                "or", "xor", "not", "shift-left", "shift-right-logical", "clamp", "minimum",
                "maximum", "power", "sqrt", "rsqrt", "exp", "log", "tanh", "is-finite",
                "convert", "broadcast", "iota", "reshape", "abs", "sign", "floor"}  # fmt: skip
_HASH_OPS = {"xor", "shift-left", "shift-right-logical"}
# threefry's rounds xor; turning bits into floats (`bits >> 9 | one`) shifts but never xors
_HASH_IN_FUSION = {"xor"}
_TARGET_RE = re.compile(r'custom_call_target="([^"]*)"')


@dataclasses.dataclass(frozen=True)
class Instruction:
    name: str
    opcode: str
    category: str
    bytes: float
    hbm_bytes: float  # the part of `bytes` in HBM
    cycles: int
    op_name: str  # the JAX operation it came from (metadata), "" when none


@dataclasses.dataclass
class Census:
    instructions: list[Instruction]

    @property
    def total_bytes(self) -> float:
        return sum(i.bytes for i in self.instructions)

    @property
    def total_hbm_bytes(self) -> float:
        return sum(i.hbm_bytes for i in self.instructions)

    def by_category(self) -> list[tuple[str, int, float, int, float]]:
        """(category, instructions, bytes, estimated cycles, HBM bytes), most bytes first."""
        rows: dict[str, list[float]] = {}
        for i in self.instructions:
            row = rows.setdefault(i.category, [0, 0.0, 0, 0.0])
            row[0] += 1
            row[1] += i.bytes
            row[2] += i.cycles
            row[3] += i.hbm_bytes
        out = [(c, int(n), b, int(cy), h) for c, (n, b, cy, h) in rows.items()]
        return sorted(out, key=lambda r: -r[2])

    def largest(self, n: int) -> list[Instruction]:
        return sorted(self.instructions, key=lambda i: -i.bytes)[:n]


def type_bytes(type_text: str, hbm_only: bool = False) -> float:
    """Bytes of an HLO type: `bf16[64,128]{1,0}`, a tuple of them, or a token (0); with
    `hbm_only`, of the arrays whose layout puts them in HBM."""
    total = 0.0
    for dtype, dims, layout in _ARRAY_RE.findall(type_text):
        if dtype not in _ITEMSIZE or (hbm_only and _ON_CHIP_RE.search(layout)):
            continue
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * _ITEMSIZE[dtype]
    return total


def _computations(hlo_text: str) -> Iterator[tuple[str, bool, list[str]]]:
    """(name, is_entry, instruction lines) of every computation in the module."""
    name, entry, body = None, False, []
    for line in hlo_text.splitlines():
        header = _HEADER_RE.match(line)
        if header and name is None:
            name, entry, body = header.group(2), bool(header.group(1)), []
        elif name is not None and line.strip() == "}":
            yield name, entry, body
            name = None
        elif name is not None:
            body.append(line)


def _split_type(rest: str) -> tuple[str, str]:
    """`(f32[2], u32[1]) fusion(...)` -> ('(f32[2], u32[1])', 'fusion(...)')."""
    if not rest.startswith("("):
        head, _, tail = rest.partition(" ")
        return head, tail
    depth = 0
    for k, ch in enumerate(rest):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return rest[: k + 1], rest[k + 1 :].lstrip()
    return rest, ""


def _tuple_parts(type_text: str) -> list[str]:
    """The top-level elements of a tuple type `(a, (b, c), d)`."""
    parts, depth, start = [], 0, 1
    for k, ch in enumerate(type_text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if (ch == "," and depth == 1) or (depth == 0 and k == len(type_text) - 1):
            parts.append(type_text[start:k].strip())
            start = k + 1
    return parts


def _operands(call: str) -> list[str]:
    """The %names between the opcode's parentheses."""
    start = call.find("(")
    depth, k = 0, start
    for k in range(start, len(call)):
        depth += call[k] == "("
        depth -= call[k] == ")"
        if depth == 0:
            break
    return re.findall(r"%([\w.\-]+)", call[start:k])


def _fused_kinds(lines: list[str]) -> set[str]:
    """What a fused computation does, by the opcodes and JAX operations inside it."""
    kinds = set()
    for line in lines:
        m = _INSTR_RE.match(line)
        if not m:
            continue
        _, call = _split_type(m.group(2))
        opcode = call.partition("(")[0]
        kinds.add(opcode)
        op_name = _OP_NAME_RE.search(line)
        if op_name and any(r in op_name.group(1) for r in _RANDOM_NAMES):
            kinds.add("random")
    return kinds


def _category(opcode: str, inner: set[str], op_name: str) -> str:
    if opcode in ("dot", "convolution") or inner & {"dot", "convolution"}:
        return "matrix products"
    if opcode in ("rng-bit-generator", "rng") or "rng-bit-generator" in inner:
        return "random bits (XLA's generator)"
    if "random" in inner or any(r in op_name for r in _RANDOM_NAMES):
        if opcode in _HASH_OPS or inner & _HASH_IN_FUSION:
            return "random bits (threefry hash)"
        return "random bits to dropout masks"
    if opcode == "scatter" or "scatter" in inner:
        return "scatter"
    if opcode == "gather" or "gather" in inner or "dynamic-slice" in inner:
        return "gather"
    if any(opcode.startswith(c) for c in _COLLECTIVES):
        return "collectives"
    if opcode in ("while", "conditional", "call"):
        return "loops and calls (their bodies counted apart)"
    if opcode == "reduce" or "reduce" in inner or "reduce-window" in inner:
        return "reductions (norms, softmax, sums)"
    if opcode in ("copy-start", "slice-start"):
        return "async copies and slices (prefetches)"
    if opcode in ("copy", "transpose") or (
        inner and inner <= {"parameter", "copy", "transpose", "bitcast", "reshape", "tuple"}
    ):
        return "copies and transposes"
    if opcode == "fusion":
        return "elementwise fusions"
    if opcode in _ELEMENTWISE:
        return "unfused elementwise and scalar ops"
    return f"other ({opcode})"


def hlo_census(hlo_text: str) -> Census:
    """The census of `hlo_text` (`compiled.as_text()`: the optimized module)."""
    comps = {name: (entry, body) for name, entry, body in _computations(hlo_text)}
    fused = {name: _fused_kinds(body) for name, (_, body) in comps.items()}
    todo = [name for name, (entry, _) in comps.items() if entry]
    seen: set[str] = set()
    out: list[Instruction] = []
    while todo:
        comp = todo.pop()
        if comp in seen or comp not in comps:
            continue
        seen.add(comp)
        sizes: dict[str, tuple[float, float]] = {}  # name -> (bytes, HBM bytes)
        for line in comps[comp][1]:
            m = _INSTR_RE.match(line)
            if not m:
                continue
            name, rest = m.groups()
            type_text, call = _split_type(rest)
            opcode = call.partition("(")[0]
            sizes[name] = (type_bytes(type_text), type_bytes(type_text, hbm_only=True))
            called = _CALLS_RE.findall(call)
            branches = _BRANCHES_RE.search(call)
            if branches:
                called += re.findall(r"%([\w.\-]+)", branches.group(1))
            if opcode in ("while", "conditional", "call"):
                todo += called
            target = _TARGET_RE.search(call)
            if opcode in _FREE or opcode.endswith("-done") or (target and "Bitcast" in target[1]):
                continue  # views, and async ops (counted at their start)
            inner: set[str] = set()
            if opcode == "fusion":
                for c in called:
                    inner |= fused.get(c, set())
            op_name = _OP_NAME_RE.search(call)
            cycles = _CYCLES_RE.search(call)
            arrays = [sizes[name], *(sizes.get(o, (0.0, 0.0)) for o in _operands(call))]
            traffic, hbm = sum(a[0] for a in arrays), sum(a[1] for a in arrays)
            parts = _tuple_parts(type_text) if opcode.endswith("-start") else []
            if len(parts) > 1:  # a copy's (result, operand, context), a slice's ((operand),
                moved = type_bytes(parts[1])  # result, context): reads what it writes
                ends = [type_bytes(p, hbm_only=True) > 0 for p in parts[:2]]
                traffic, hbm = 2 * moved, moved * sum(ends)
            category = _category(opcode, inner, op_name.group(1) if op_name else "")
            if opcode == "custom-call":
                category = f"custom call {target[1] if target else ''}".strip()
            out.append(
                Instruction(
                    name, opcode, category,
                    traffic, hbm, int(cycles.group(1)) if cycles else 0,
                    op_name.group(1) if op_name else "",
                )
            )  # fmt: skip
    return Census(out)


def _short(op_name: str, width: int = 70) -> str:
    """The tail of a JAX op name (`jit(_train_step)/jvp(Bert...)/bert/encoder/...`)."""
    parts = [p for p in op_name.split("/") if not p.startswith(("jit(", "jvp(", "transpose("))]
    text = "/".join(parts) or op_name
    return text if len(text) <= width else "..." + text[-(width - 3) :]


def format_census(census: Census, top: int = 10, label: str = "") -> str:
    total = census.total_bytes or 1.0
    cycles = sum(i.cycles for i in census.instructions)
    estimate = f", {cycles:.4g} estimated cycles (the TPU compiler's)" if cycles else ""
    lines = [f"HLO census{f' ({label})' if label else ''}: {len(census.instructions)} "
             f"instructions, {total / 1e9:.3g} GB of operands + outputs, "
             f"{census.total_hbm_bytes / 1e9:.3g} GB of them in HBM{estimate}"]  # fmt: skip
    head = f"  {'category':<46} {'count':>6} {'GB':>9} {'bytes':>6} {'HBM GB':>8}"
    lines.append(head + (f" {'est. cycles':>12}" if cycles else ""))
    for cat, n, b, cy, hbm in census.by_category():
        row = f"  {cat:<46} {n:>6} {b / 1e9:>9.3f} {100 * b / total:>5.1f}% {hbm / 1e9:>8.3f}"
        lines.append(row + (f" {100 * cy / cycles:>11.1f}%" if cycles else ""))
    if top:
        lines.append(f"  largest {top} by bytes (MB, MB in HBM):")
        for i in census.largest(top):
            lines.append(f"    {i.bytes / 1e6:>9.1f} {i.hbm_bytes / 1e6:>9.1f}  "
                         f"{i.category:<28.28} {_short(i.op_name)}")  # fmt: skip
    return "\n".join(lines)
