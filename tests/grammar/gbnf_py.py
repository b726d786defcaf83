"""A small GBNF reader, random sentence generator and matcher in Python, for the schema tests:
the subset lumen's schema converter writes (literals, classes, rule references, groups,
alternation, ? * + {m} {m,} {m,n}), read as llama.cpp does (code points)."""
import random
import re

INF = float("inf")


class GbnfError(Exception):
    pass


def _esc(s, i):
    """Escape at s[i] == '\\': (code point, next index)."""
    c = s[i + 1]
    simple = {"n": 10, "r": 13, "t": 9, "\\": 92, '"': 34, "[": 91, "]": 93, "-": 45, "^": 94}
    if c in simple:
        return simple[c], i + 2
    width = {"x": 2, "u": 4, "U": 8}.get(c)
    if width:
        return int(s[i + 2:i + 2 + width], 16), i + 2 + width
    raise GbnfError("bad escape at %d: %r" % (i, s[i:i + 4]))


class Parser:
    def __init__(self, text):
        self.rules = {}
        for line in text.splitlines():
            if not line.strip():
                continue
            m = re.match(r"([a-zA-Z0-9-]+) ::= (.*)$", line)
            if not m:
                raise GbnfError("bad rule line: %r" % line)
            self.s, self.i = m.group(2), 0
            node = self.alt()
            self.ws()
            if self.i != len(self.s):
                raise GbnfError("junk after rule %s: %r" % (m.group(1), self.s[self.i:]))
            self.rules[m.group(1)] = node
        for name, node in self.rules.items():
            self._check_refs(node)

    def _check_refs(self, n):
        if n[0] == "ref" and n[1] not in self.rules:
            raise GbnfError("undefined rule " + n[1])
        for ch in n[1] if n[0] in ("alt", "seq") else ([n[1]] if n[0] == "rep" else []):
            self._check_refs(ch)

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] == " ":
            self.i += 1

    def peek(self):
        self.ws()
        return self.s[self.i] if self.i < len(self.s) else ""

    def alt(self):
        seqs = [self.seq()]
        while self.peek() == "|":
            self.i += 1
            seqs.append(self.seq())
        return seqs[0] if len(seqs) == 1 else ("alt", seqs)

    def seq(self):
        items = []
        while self.peek() not in ("", "|", ")"):
            items.append(self.quant(self.atom()))
        return items[0] if len(items) == 1 else ("seq", items)

    def atom(self):
        c = self.peek()
        s = self.s
        if c == '"':
            self.i += 1
            out = []
            while s[self.i] != '"':
                if s[self.i] == "\\":
                    cp, self.i = _esc(s, self.i)
                    out.append(chr(cp))
                else:
                    out.append(s[self.i])
                    self.i += 1
            self.i += 1
            return ("lit", "".join(out))
        if c == "[":
            self.i += 1
            neg = s[self.i] == "^"
            if neg:
                self.i += 1
            ranges = []
            while s[self.i] != "]":
                lo, self.i = _esc(s, self.i) if s[self.i] == "\\" else (ord(s[self.i]), self.i + 1)
                hi = lo
                if s[self.i] == "-" and s[self.i + 1] != "]":
                    self.i += 1
                    hi, self.i = _esc(s, self.i) if s[self.i] == "\\" else (ord(s[self.i]), self.i + 1)
                ranges.append((lo, hi))
            self.i += 1
            return ("cls", neg, tuple(ranges))
        if c == "(":
            self.i += 1
            node = self.alt()
            if self.peek() != ")":
                raise GbnfError("missing )")
            self.i += 1
            return node
        m = re.match(r"[a-zA-Z0-9-]+", s[self.i:])
        if not m:
            raise GbnfError("bad atom at %r" % s[self.i:])
        self.i += len(m.group(0))
        return ("ref", m.group(0))

    def quant(self, node):
        s = self.s
        if self.i < len(s) and s[self.i] in "?*+":
            q = s[self.i]
            self.i += 1
            return ("rep", node, 1 if q == "+" else 0, 1 if q == "?" else INF)
        m = re.match(r"\{(\d+)(,(\d*))?\}", s[self.i:])
        if m:
            self.i += len(m.group(0))
            mn = int(m.group(1))
            mx = mn if m.group(2) is None else (int(m.group(3)) if m.group(3) else INF)
            return ("rep", node, mn, mx)
        return node


def in_class(node, cp):
    _, neg, ranges = node
    inside = any(lo <= cp <= hi for lo, hi in ranges)
    return inside != neg


class Grammar:
    def __init__(self, text):
        self.rules = Parser(text).rules
        self._cost = {}
        self._min_costs()

    # ---- generation
    def _min_costs(self):
        cost = {k: INF for k in self.rules}
        def c(n):
            t = n[0]
            if t == "lit": return len(n[1])
            if t == "cls": return 1
            if t == "ref": return cost[n[1]]
            if t == "alt": return min(c(x) for x in n[1])
            if t == "seq": return sum(c(x) for x in n[1])
            if t == "rep": return 0 if n[2] == 0 else n[2] * c(n[1])
        changed = True
        while changed:
            changed = False
            for k, n in self.rules.items():
                v = c(n)
                if v < cost[k]:
                    cost[k], changed = v, True
        self.cost = cost
        self.c = c

    POOL = [chr(x) for x in range(0x20, 0x7F)] + list("éß中😀\u00a0\u2028\u7fff\t\n")

    def _pick(self, rng, node):
        _, neg, ranges = node
        if not neg:
            for _ in range(50):
                lo, hi = rng.choice(ranges)
                cp = rng.randint(lo, hi)
                if not 0xD800 <= cp <= 0xDFFF:
                    return chr(cp)
        for _ in range(200):
            ch = rng.choice(self.POOL)
            if in_class(node, ord(ch)):
                return ch
        raise GbnfError("cannot pick a character of %r" % (node,))

    def generate(self, rng, root="root", budget=60):
        out = []
        steps = [0]
        def g(n, depth):
            steps[0] += 1
            t = n[0]
            tight = depth > budget or steps[0] > 4000
            if t == "lit": out.append(n[1])
            elif t == "cls": out.append(self._pick(rng, n))
            elif t == "ref": g(self.rules[n[1]], depth + 1)
            elif t == "seq":
                for x in n[1]: g(x, depth + 1)
            elif t == "alt":
                opts = n[1]
                if tight:
                    best = min(self.c(x) for x in opts)
                    opts = [x for x in opts if self.c(x) == best]
                g(rng.choice(opts), depth + 1)
            elif t == "rep":
                mn, mx = n[2], n[3]
                k = mn if tight else rng.randint(mn, int(min(mx, mn + 3)))
                for _ in range(k): g(n[1], depth + 1)
        g(self.rules[root], 0)
        return "".join(out)

    # ---- matching: the set of end positions of node from pos
    def match(self, text, root="root"):
        memo = {}
        def m(n, pos):
            key = (id(n), pos)
            if key in memo:
                return memo[key]
            memo[key] = frozenset()  # a cycle without progress matches nothing
            t = n[0]
            if t == "lit":
                r = frozenset([pos + len(n[1])]) if text.startswith(n[1], pos) else frozenset()
            elif t == "cls":
                r = frozenset([pos + 1]) if pos < len(text) and in_class(n, ord(text[pos])) else frozenset()
            elif t == "ref":
                r = m(self.rules[n[1]], pos)
            elif t == "alt":
                r = frozenset().union(*[m(x, pos) for x in n[1]])
            elif t == "seq":
                cur = {pos}
                for x in n[1]:
                    cur = set().union(*[m(x, p) for p in cur]) if cur else set()
                r = frozenset(cur)
            elif t == "rep":
                mn, mx = n[2], n[3]
                ends, frontier, seen, k = set(), {pos}, set(), 0
                if mn == 0: ends.add(pos)
                while frontier and k < mx:
                    k += 1
                    nxt = set().union(*[m(n[1], p) for p in frontier])
                    if k >= mn: ends |= nxt
                    frontier = nxt - seen if k >= mn else nxt
                    if k >= mn: seen |= nxt
                r = frozenset(ends)
            memo[key] = r
            return r
        return len(text) in m(self.rules[root], 0)
