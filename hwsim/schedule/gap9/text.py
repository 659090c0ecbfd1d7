"""GAP9 instructions as program text (``hwsim.isa.gap9`` syntax): what ``hwsim compile``
writes; ``hwsim.isa.gap9.parse_line`` reads each line back to the same instruction."""

from __future__ import annotations

from hwsim.isa import gap9 as isa


def _value(value) -> str:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _dma(d: isa.DmaCopy) -> str:
    text = f"dma {d.src}:{d.src_addr:#x} -> {d.dst}:{d.dst_addr:#x} {d.row_bytes}"
    if d.rows > 1:
        text += f" rows={d.rows} src_stride={d.src_stride} dst_stride={d.dst_stride}"
    return text


FORMATS = {
    isa.DmaCopy: _dma,
    isa.DmaWait: lambda w: " ".join(["dma wait"] + [str(i) for i in w.ids]),
    isa.Ne16Acquire: lambda _: "ne16 acquire",
    isa.Ne16Write: lambda w: f"ne16 {w.register} {w.value:#x}",
    isa.Ne16Commit: lambda _: "ne16 commit",
    isa.Ne16Status: lambda _: "ne16 status",
    isa.Ne16Wait: lambda w: "ne16 wait" + ("" if w.job is None else f" {w.job}"),
    isa.Kernel: lambda k: " ".join([f"cluster {k.name}"] + [f"{name}={_value(v)}"
                                                            for name, v in k.args.items()]),
    isa.Barrier: lambda _: "barrier",
    isa.LayerStart: lambda _: "layer",
}


def text(instr) -> str:
    return FORMATS[type(instr)](instr)
