# The input of issue 11's state benchmarks (see make_input.sh): JSON lines on stdout.
# usage: zipf_bids.py N bid|auction
import sys, random, bisect, itertools
n = int(sys.argv[1]); what = sys.argv[2]
random.seed(7)
AUCTIONS, BIDDERS = 10_000, 100_000
if what == "auction":
    out = sys.stdout
    for a in range(9_000):
        out.write('{"id":%d,"category":%d,"seller":%d}\n' % (a, a % 20, a % 997))
    sys.exit()
w = [1.0 / (r + 1) for r in range(AUCTIONS)]
cdf = list(itertools.accumulate(w)); tot = cdf[-1]
rnd = random.random; bis = bisect.bisect_left
out = sys.stdout
buf = []
for i in range(n):
    a = bis(cdf, rnd() * tot)
    b = int(rnd() * BIDDERS)
    buf.append('{"auction":%d,"bidder":%d,"price":%d,"channel":"c%d"}\n' % (a, b, int(rnd() * 10000000), i % 4))
    if len(buf) >= 100000:
        out.write(''.join(buf)); buf.clear()
out.write(''.join(buf))
