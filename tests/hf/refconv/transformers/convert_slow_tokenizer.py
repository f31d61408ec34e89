"""bytes_to_unicode: GPT-2's byte-level alphabet (the printable bytes stand for themselves, the
other 68 map in order onto U+0100 and up), which some of the converter's vocab readers use."""


def bytes_to_unicode():
    keep = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table
