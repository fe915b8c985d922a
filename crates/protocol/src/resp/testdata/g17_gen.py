import random, struct
random.seed(20240607)
def bits(x): return struct.unpack('<Q', struct.pack('<d', x))[0]
vals = set()
specials = [0.0, -0.0, 1.0, -1.0, 0.1, 0.2, 0.3, 1/3, 2/3, 3.14, 1.5, 2.5, 100.0, 1e16, 1e17, 1e18, 1e20, 1e21,
  1e100, 1e300, 1e308, 1.7976931348623157e308, 2.2250738585072014e-308, 2.2250738585072009e-308, 5e-324, -5e-324,
  1e-4, 1e-5, 0.0001, 0.00012345, 0.00001234, 9.9999999999999999e-5, 9.99999999999999e-5, 0.00009999999999999999,
  99999999999999999.0, 9999999999999998.0, 12345678901234567.0, 123456789012345678.0, 1.0000000000000001e20,
  100000000000000000000.0, 1 + 1/131072, 1 + 3/131072, 0.5, 0.25, 0.125, 1e-320, 4.9406564584124654e-324,
  123.456, -123.456, 1e22, 1e23, 2**53, 2**53+2, 2**63, 2**64, -2**63, 3.0e-5, 7e-10, 1.1, 2.675, 1e15, 1e-15,
  float(10**17-1), 0.1+0.2, 1e16-1, 9007199254740993.0, 4.35, 0.035, 0.000123456789012345678]
for s in specials: vals.add(bits(s))
for e in range(-20, 25):
    for m in (1.0, 9.999999999999999, 9.9999999999999999, 5.0, 1.0000000000000002):
        vals.add(bits(m * 10.0**e)); vals.add(bits(-m * 10.0**e))
for _ in range(250):
    b = random.getrandbits(64)
    if (b >> 52) & 0x7ff == 0x7ff: continue
    vals.add(b)
for _ in range(150):
    x = random.uniform(-1e6, 1e6) * 10.0 ** random.randint(-12, 22)
    vals.add(bits(x))
for _ in range(60):
    vals.add(bits(round(random.uniform(-1e4, 1e4), random.randint(0, 6))))
for _ in range(30):
    vals.add(random.getrandbits(52))  # subnormals
for _ in range(40):
    k = random.getrandbits(17) | 1; vals.add(bits(random.randint(1, 9) + k / 131072))  # ties at 17 digits
for b in sorted(vals):
    print('%016x' % b)
