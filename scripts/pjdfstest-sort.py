#!/usr/bin/env python3
"""Sort pjdfstest's failed subtests by cause, for docs/POSIX.md.

Reads the output of `prove -rv` over pjdfstest run with scripts/pjdfstest.sh
(whose copy of tests/misc.sh also names what each passing subtest tried)
and prints Markdown: per category, how many subtests failed because they
make a FIFO, a device file, a socket or a hard link (which Strata does not
have), how many failed only because such a file was made just before, and
every other failure grouped by the call, what was expected and what came
back, with the test files it happens in.
"""
import collections
import re
import sys

UNSUPPORTED = {"mkfifo", "mknod", "link", "bind", "connect"}
# The argument that names what a call creates.
CREATES = {"create": 0, "open": 0, "mkdir": 0, "mkfifo": 0, "mknod": 0, "bind": 0,
           "symlink": 1, "link": 1, "rename": 1}

file_re = re.compile(r"^\S*/tests/(\w+)/(\S+\.t) \.+")
line_re = re.compile(r"^(not ok|ok) (\d+)(?: - tried '(.*?)'(?:, expected (.*?), got (.*))?)?\s*$")


def calls(args):
    """The calls of one fstest command line: [(name, [args])]."""
    toks = args.split()
    i = 0
    while i < len(toks) and toks[i] in ("-u", "-g", "-U", "--"):
        i += 1 if toks[i] == "--" else 2
    out, cur = [], []
    for t in toks[i:]:
        if t == ":":
            if cur:
                out.append((cur[0], cur[1:]))
            cur = []
        else:
            cur.append(t)
    if cur:
        out.append((cur[0], cur[1:]))
    return out


def touches(tok, bad):
    return any(tok == b or tok.startswith(b + "/") for b in bad)


def main(path, known=None):
    cat = collections.defaultdict(lambda: collections.Counter())
    other = collections.defaultdict(lambda: [0, set()])
    total = collections.Counter()
    category, tfile, bad = None, None, set()
    for line in open(path, errors="replace"):
        m = file_re.match(line)
        if m:
            category, tfile, bad = m.group(1), m.group(2), set()
            line = line[m.end():]
        m = line_re.match(line.strip())
        if not m or category is None:
            continue
        ok, args, exp, got = m.group(1) == "ok", m.group(3), m.group(4), m.group(5)
        cs = calls(args) if args else []
        if ok:
            for name, a in cs:
                k = CREATES.get(name)
                if k is not None and len(a) > k:
                    bad.discard(a[k])
                if name in ("unlink", "rmdir") and a:
                    bad.discard(a[0])
            continue
        total[category] += 1
        if any(name in UNSUPPORTED for name, _ in cs):
            cat[category]["unsupported"] += 1
            for name, a in cs:
                k = CREATES.get(name)
                if name in UNSUPPORTED and k is not None and len(a) > k:
                    bad.add(a[k])
        elif any(touches(t, bad) for _, a in cs for t in a):
            cat[category]["after"] += 1
        else:
            cat[category]["other"] += 1
            if cs:
                # Inode numbers differ from run to run.
                e, g = (re.sub(r"-?\d{6,}", "N", x.strip()) for x in (exp, got))
                key = f"`{cs[0][0]}`: expected {e}, got {g or '(nothing)'}"
            else:
                key = "a check of the state left by the calls before (`test_check`)"
            other[(category, key)][0] += 1
            other[(category, key)][1].add(tfile)
    print(f"{sum(total.values())} failed subtests.\n")
    print("| category | failed | make a FIFO, device, socket or hard link | follow from one made just before | other |")
    print("|---|---|---|---|---|")
    for c in sorted(total):
        k = cat[c]
        print(f"| {c} | {total[c]} | {k['unsupported']} | {k['after']} | {k['other']} |")
    print("\nThe others, by call, expected and got:\n")
    print("| category | call: expected, got | subtests | test files |")
    print("|---|---|---|---|")
    for (c, key), (n, files) in sorted(other.items(), key=lambda kv: (kv[0][0], -kv[1][0])):
        print(f"| {c} | {key} | {n} | {', '.join(sorted(files))} |")
    if known is None:
        return 0
    # CI: every other failure must be one docs/POSIX.md explains.
    allowed = set()
    for line in open(known):
        line = line.rstrip("\n")
        if line and not line.startswith("#"):
            allowed.add(tuple(line.split("\t", 1)))
    new = [(c, key) for (c, key) in other if (c, key) not in allowed]
    for c, key in sorted(new):
        print(f"pjdfstest: a failure not in {known}: {c}\t{key}", file=sys.stderr)
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
