"""NVRTC's PTX for a small straight-line kernel, and one thread of it evaluated on the CPU.

What NVRTC makes of a few lines of device code can be checked without a GPU: :func:`ptx` compiles a source with
NVRTC (through ``cuda.bindings``: no driver, no device) to PTX, and :func:`run` evaluates the PTX of a kernel
without branches or loops (``#pragma unroll``) for one thread, with PTX's own semantics per instruction (register
widths and signedness as the instruction's type says). Only the integer instructions such kernels use are known;
any other raises, so a kernel the evaluator does not understand fails loudly instead of giving a wrong answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from fusec.codegen import nvrtc

_WIDTH = {"8": 8, "16": 16, "32": 32, "64": 64}
_TYPE = re.compile(r"^[sub](8|16|32|64)$|^pred$")


def ptx(source: str, arch: str = "compute_90") -> str:
    """The PTX NVRTC makes of ``source`` (CUDA C++17, the include path fusec compiles with)."""
    from cuda.bindings import nvrtc as raw

    err, prog = raw.nvrtcCreateProgram(source.encode(), b"ptx_eval.cu", 0, [], [])
    assert err == raw.nvrtcResult.NVRTC_SUCCESS, err
    try:
        options = [f"-arch={arch}".encode(), b"-std=c++17"] + [f"-I{d}".encode() for d in nvrtc.include_dirs()]
        (err,) = raw.nvrtcCompileProgram(prog, len(options), options)
        if err != raw.nvrtcResult.NVRTC_SUCCESS:
            _, size = raw.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            raw.nvrtcGetProgramLog(prog, log)
            raise AssertionError(log.decode(errors="replace"))
        _, size = raw.nvrtcGetPTXSize(prog)
        buf = b" " * size
        raw.nvrtcGetPTX(prog, buf)
        return buf.decode().rstrip("\x00")
    finally:
        raw.nvrtcDestroyProgram(prog)


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


class _Thread:
    def __init__(self, params: Mapping[str, int], memory: bytearray):
        self.reg: dict[str, int] = {}
        self.params, self.memory = params, memory
        self.stores: list[tuple[int, int, int]] = []  # (address, bytes, value)

    def value(self, token: str, bits: int) -> int:
        token = token.strip()
        if token.startswith("%"):
            return self.reg[token] & ((1 << bits) - 1)
        return int(token, 0) & ((1 << bits) - 1)

    def address(self, token: str) -> int:
        m = re.fullmatch(r"\[(%?\w+)(?:\+(-?\w+))?\]", token.strip())
        assert m, token
        base = self.reg[m.group(1)] if m.group(1).startswith("%") else self.params[m.group(1)]
        return base + (int(m.group(2), 0) if m.group(2) else 0)

    def execute(self, op: str, args: list[str]) -> None:
        parts = op.split(".")
        name = parts[0]
        types = [p for p in parts[1:] if _TYPE.match(p)]
        t = types[-1] if types else "b32"
        bits = 1 if t == "pred" else _WIDTH[t[1:]]
        signed = t.startswith("s")
        mask = (1 << bits) - 1

        def arg(k: int, width: int = bits) -> int:
            return self.value(args[k], width)

        def sarg(k: int, width: int = bits) -> int:
            return _signed(arg(k, width), width) if signed else arg(k, width)

        d = args[0] if args else ""
        if name == "ld" and "param" in parts:
            self.reg[d] = self.params[args[1].strip("[]")] & mask
        elif name == "cvta":
            self.reg[d] = self.reg[args[1]]
        elif name == "ld" and "global" in parts:
            address = self.address(args[-1])
            size = bits // 8
            if d.startswith("{"):  # a vector load
                regs = [r.strip() for r in d.strip("{}").split(",")]
                for k, r in enumerate(regs):
                    self.reg[r] = int.from_bytes(self.memory[address + k * size: address + (k + 1) * size], "little")
            else:
                raw = int.from_bytes(self.memory[address: address + size], "little")
                self.reg[d] = (_signed(raw, bits) if signed else raw) & 0xFFFFFFFF
        elif name == "st" and "global" in parts:
            self.stores.append((self.address(args[0]), bits // 8, arg(1)))
        elif name == "mov" and d.startswith("{"):  # split a register into its halves
            halves = [r.strip() for r in d.strip("{}").split(",")]
            word, w = arg(1), bits // len(halves)
            for k, r in enumerate(halves):
                self.reg[r] = (word >> (w * k)) & ((1 << w) - 1)
        elif name == "mov" and args[1].startswith("{"):
            halves = [r.strip() for r in args[1].strip("{}").split(",")]
            w = bits // len(halves)
            self.reg[d] = sum(self.value(r, w) << (w * k) for k, r in enumerate(halves))
        elif name == "mov":
            self.reg[d] = arg(1)
        elif name == "cvt":
            to, frm = types[0], types[1]
            x = self.value(args[1], _WIDTH[frm[1:]])
            if frm.startswith("s"):
                x = _signed(x, _WIDTH[frm[1:]])
            self.reg[d] = x & ((1 << _WIDTH[to[1:]]) - 1)
        elif name in ("and", "or", "xor"):
            if t == "pred":
                a, b = self.reg[args[1]], self.reg[args[2]]
                self.reg[d] = {"and": a & b, "or": a | b, "xor": a ^ b}[name]
            else:
                self.reg[d] = {"and": arg(1) & arg(2), "or": arg(1) | arg(2), "xor": arg(1) ^ arg(2)}[name]
        elif name == "not":
            self.reg[d] = (1 - self.reg[args[1]]) if t == "pred" else (~arg(1)) & mask
        elif name == "shl":
            self.reg[d] = (arg(1) << min(arg(2, 32), bits)) & mask
        elif name == "shr":
            self.reg[d] = (sarg(1) >> min(arg(2, 32), bits)) & mask
        elif name == "mul" and "hi" in parts:
            self.reg[d] = ((sarg(1) * sarg(2)) >> bits) & mask
        elif name == "mul" and "wide" in parts:
            self.reg[d] = (sarg(1) * sarg(2)) & ((1 << (2 * bits)) - 1)
        elif name in ("add", "sub", "mul"):
            a, b = arg(1), arg(2)
            self.reg[d] = {"add": a + b, "sub": a - b, "mul": a * b}[name] & mask
        elif name in ("neg", "abs"):
            x = _signed(arg(1), bits)
            self.reg[d] = (-x if name == "neg" else abs(x)) & mask
        elif name in ("min", "max"):
            a, b = sarg(1), sarg(2)
            self.reg[d] = (min(a, b) if name == "min" else max(a, b)) & mask
        elif name == "setp":
            a, b = sarg(1), sarg(2)
            result = {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b, "ne": a != b,
                      "lo": a < b, "ls": a <= b, "hi": a > b, "hs": a >= b}[parts[1]]
            if len(args) > 3:  # setp.cmp.and p, a, b, q
                result = {"and": result and self.reg[args[3]], "or": result or self.reg[args[3]]}[parts[2]]
            self.reg[d] = int(result)
        elif name == "selp":
            self.reg[d] = arg(1) if self.reg[args[3]] else arg(2)
        elif name == "bfe":
            position, length = arg(2, 32), arg(3, 32)
            field = (arg(1) >> position) & ((1 << length) - 1)
            self.reg[d] = (_signed(field, length) if signed else field) & mask
        elif name == "prmt" and len(parts) == 2:  # default mode: byte k of d is the byte (or its sign) nibble k names
            pool = arg(1, 32) | (arg(2, 32) << 32)
            selector, result = arg(3, 32), 0
            for k in range(4):
                nibble = (selector >> (4 * k)) & 0xF
                byte = (pool >> (8 * (nibble & 7))) & 0xFF
                if nibble & 8:
                    byte = 0xFF if byte & 0x80 else 0
                result |= byte << (8 * k)
            self.reg[d] = result
        elif name == "ret":
            pass
        else:
            raise NotImplementedError(f"ptx_eval does not know {op}")


def run(ptx_text: str, kernel: str, params: Sequence[int], memory: bytearray) -> list[tuple[int, int, int]]:
    """Evaluate entry ``kernel`` of ``ptx_text`` for one thread with ``params`` (its parameters' values, in order)
    over ``memory`` (addresses are offsets into it); return its global stores (address, bytes, value)."""
    m = re.search(r"\.entry\s+" + re.escape(kernel) + r"\s*\((.*?)\)\s*\{(.*?)\n\}", ptx_text, re.S)
    assert m, f"no entry {kernel}"
    names = re.findall(r"\.param\s+\.\w+\s+(\w+)", m.group(1))
    thread = _Thread(dict(zip(names, params)), memory)
    for line in m.group(2).splitlines():
        line = line.split("//")[0].strip()
        if not line or line.startswith((".reg", ".local", ".shared", "{", "}", "$")):
            continue
        if line.startswith("@") or line.startswith("bra"):
            raise NotImplementedError(f"ptx_eval runs straight-line code only: {line}")
        op, _, rest = line.rstrip(";").partition(" ")
        args = [a.strip() for a in re.split(r",(?![^{]*\})", rest)] if rest.strip() else []
        thread.execute(op.strip(), args)
    return thread.stores


__all__ = ["ptx", "run"]
