"""Bits of a NAL unit's payload (RBSP): exp-Golomb writing and reading, emulation prevention."""


class BitWriter:
    def __init__(self):
        self.bits = []

    def u(self, n, value):
        self.bits.extend((value >> i) & 1 for i in reversed(range(n)))

    def ue(self, value):
        value += 1
        self.u(value.bit_length() - 1, 0)
        self.u(value.bit_length(), value)

    def se(self, value):
        self.ue(2 * value - 1 if value > 0 else -2 * value)

    def payload(self):
        """The bits with the RBSP trailing bits, as escaped bytes (00 00 0x gets its 03)."""
        bits = self.bits + [1]
        bits += [0] * (-len(bits) % 8)
        rbsp = bytes(int("".join(map(str, bits[i:i + 8])), 2) for i in range(0, len(bits), 8))
        out, zeros = bytearray(), 0
        for b in rbsp:
            if zeros >= 2 and b <= 3:
                out.append(3)
                zeros = 0
            out.append(b)
            zeros = zeros + 1 if b == 0 else 0
        return bytes(out)

    def nal(self, header):
        """The NAL unit with a 4-byte start code; `header` is its header's bytes (or the one
        byte of an H.264 header as a number)."""
        return b"\x00\x00\x00\x01" + (bytes([header]) if isinstance(header, int) else header) + self.payload()


class BitReader:
    """u(n) and ue(v) over an escaped payload (emulation prevention removed first); past the end
    it reads zeros."""

    def __init__(self, payload):
        rbsp, zeros = bytearray(), 0
        for b in payload:
            if zeros >= 2 and b == 3:
                zeros = 0
                continue
            rbsp.append(b)
            zeros = zeros + 1 if b == 0 else 0
        self.bits = [(byte >> (7 - i)) & 1 for byte in rbsp for i in range(8)]
        self.pos = 0

    def u(self, n):
        value = 0
        for _ in range(n):
            value = (value << 1) | (self.bits[self.pos] if self.pos < len(self.bits) else 0)
            self.pos += 1
        return value

    def ue(self):
        zeros = 0
        while self.pos < len(self.bits) and self.bits[self.pos] == 0 and zeros < 32:
            zeros += 1
            self.pos += 1
        self.pos += 1
        return (1 << zeros) - 1 + self.u(zeros)

    def rest(self):
        """The bits left before the rbsp_stop_one_bit (the last one bit)."""
        bits = self.bits[self.pos:]
        while bits and bits[-1] == 0:
            bits.pop()
        return bits[:-1]
