# pngstat.py PNG - print "WIDTH HEIGHT COLOURS INK COLOURED" of an 8-bit
# RGB or RGBA PNG, decoded here (zlib and the five row filters): its
# distinct colours, its pixels that are not white, and those that are
# not grey.  For tests that a plot is more than a blank page.
import struct, sys, zlib
b = open(sys.argv[1], 'rb').read()
assert b[:8] == b'\x89PNG\r\n\x1a\n'
pos, idat, ihdr = 8, b'', None
while pos < len(b):
    n, t = struct.unpack('>I4s', b[pos:pos + 8])
    d = b[pos + 8:pos + 8 + n]
    if t == b'IHDR': ihdr = struct.unpack('>IIBBBBB', d)
    if t == b'IDAT': idat += d
    pos += 12 + n
w, h, depth, ctype = ihdr[:4]
bpp = {2: 3, 6: 4}[ctype]
raw = zlib.decompress(idat)
stride = w * bpp
prev = bytearray(stride)
colours, ink, coloured = set(), 0, 0
for y in range(h):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        c = prev[i - bpp] if i >= bpp else 0
        up = prev[i]
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + up) & 255
        elif f == 3: line[i] = (line[i] + (a + up) // 2) & 255
        elif f == 4:
            p = a + up - c
            pa, pb, pc = abs(p - a), abs(p - up), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else up if pb <= pc else c)) & 255
    for x in range(0, stride, bpp):
        px = bytes(line[x:x + 3])
        colours.add(px)
        if px != b'\xff\xff\xff': ink += 1
        if px[0] != px[1] or px[1] != px[2]: coloured += 1
    prev = line
print(w, h, len(colours), ink, coloured)
