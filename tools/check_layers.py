#!/usr/bin/env python3
"""check_layers.py - the rooms of lib/ and who may call whom.

lib/ holds one folder per stage (lib/README.md). Calls run one way: core/
drives every stage; a stage calls only the rooms below it (RULES); util/
calls nobody. This script reads every `#include "..."` under lib/ and fails
(exit 1, one line per problem) on:

  - an include from one folder to another that RULES does not allow (an
    upward include, or a sideways one between stages);
  - a cycle between folders, or between files (an include cycle);
  - a file directly in lib/ (other than ringfeed.map and README.md), or in a
    folder that is not a stage; two files of the same base name (every stage
    folder is on the include path, so "name.h" must name one file);
  - a stage folder without its README.md, or a quoted include that names no
    file of lib/ or include/.

With --objects LIST (a file naming the library's object files, one a line,
as CMake writes $<TARGET_OBJECTS:ringfeed_obj>), it also reads their symbols
with nm and fails on a call or a reference from one folder into another
that RULES does not allow: a declaration copied into a .c file does not get
around the rule. --self-test runs the checks on small trees made for the
purpose (each must fail, and a good one pass).

Standard library only. Usage:
  tools/check_layers.py [--root DIR] [--objects LIST] [--nm NM] [--graph]
  tools/check_layers.py --self-test
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# Who may include (and call) whom: each stage lists the rooms below it.
# core/ is the only room that knows every other one.
RULES = {
    "core": ["io", "source", "remote", "decode", "transform", "cuda", "util"],
    "remote": ["source", "util"],
    "source": ["util"],
    "decode": ["transform", "util"],
    "transform": ["util"],
    "io": ["util"],
    "cuda": ["util"],
    "util": [],
}
TOP = "core"
LOOSE = {"ringfeed.map", "README.md"}  # what may sit directly in lib/
SOURCE_EXT = (".c", ".h", ".cu")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def rules_problems(rules):
    """The rule table itself: every room named, no cycle, one top."""
    out = []
    for stage, below in rules.items():
        for b in below:
            if b not in rules:
                out.append(f"RULES: {stage} may call {b}, which is no stage")
    cyc = find_cycle({s: set(b) for s, b in rules.items()})
    if cyc:
        out.append("RULES: a cycle: " + " -> ".join(cyc))
    every = [s for s, b in rules.items() if set(b) == set(rules) - {s}]
    if every != [TOP]:
        out.append(f"RULES: {TOP}/ must be the only room that knows every other (now: {every})")
    return out


def find_cycle(graph):
    """One cycle of graph {node: set(nodes)} as a list [a, b, ..., a], or None."""
    state = {}
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def scan(root, rules):
    """Problems of the tree at root (its lib/ and include/), and the folder graph."""
    lib = os.path.join(root, "lib")
    problems = []
    files = {}  # "stage/name" -> text
    for entry in sorted(os.listdir(lib)):
        path = os.path.join(lib, entry)
        if os.path.isdir(path):
            if entry not in rules:
                problems.append(f"lib/{entry}/: not a stage folder ({', '.join(rules)})")
                continue
            if not os.path.isfile(os.path.join(path, "README.md")):
                problems.append(f"lib/{entry}/: no README.md (what the stage does, whom it calls)")
            for dirpath, dirs, names in os.walk(path):
                for d in dirs:
                    problems.append(f"{os.path.relpath(os.path.join(dirpath, d), root)}/: "
                                    "a folder inside a stage (keep each stage flat)")
                dirs[:] = []
                for name in sorted(names):
                    if name.endswith(SOURCE_EXT):
                        with open(os.path.join(dirpath, name), encoding="utf-8",
                                  errors="replace") as f:
                            files[f"{entry}/{name}"] = f.read()
        elif entry not in LOOSE:
            problems.append(f"lib/{entry}: lib/ holds one folder per stage; "
                            "move it into the one it belongs to (lib/README.md)")
    by_base = {}
    for rel in files:
        by_base.setdefault(os.path.basename(rel), []).append(rel)
    for base, rels in sorted(by_base.items()):
        if len(rels) > 1:
            problems.append(f"{base}: two files of that name ({', '.join('lib/' + r for r in rels)}); "
                            "every stage folder is on the include path")
    public = set(os.listdir(os.path.join(root, "include"))) if os.path.isdir(
        os.path.join(root, "include")) else set()

    file_graph = {rel: set() for rel in files}
    folder_graph = {s: set() for s in rules}
    for rel, text in sorted(files.items()):
        stage = rel.split("/")[0]
        for m in INCLUDE_RE.finditer(text):
            name = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            here = f"{stage}/{name}"
            if here in files:
                target = here
            elif "/" in name and name in files:
                target = name
            elif os.path.basename(name) in by_base and "/" not in name:
                target = by_base[name][0]
            elif name in public:
                continue  # the public header: every room may include it
            else:
                problems.append(f"lib/{rel}:{line}: #include \"{name}\" names no file of lib/ "
                                "or include/")
                continue
            file_graph[rel].add(target)
            tstage = target.split("/")[0]
            if tstage == stage:
                continue
            folder_graph[stage].add(tstage)
            if tstage not in rules.get(stage, ()):
                problems.append(f"lib/{rel}:{line}: includes lib/{target}: {stage}/ may not "
                                f"include {tstage}/ ({stage}/ may call: "
                                f"{', '.join(rules.get(stage, [])) or 'nothing'})")
    cyc = find_cycle(folder_graph)
    if cyc:
        problems.append("folders: an include cycle: " + " -> ".join(cyc))
    cyc = find_cycle(file_graph)
    if cyc:
        problems.append("files: an include cycle: " + " -> ".join("lib/" + c for c in cyc))
    return problems, folder_graph, files


def symbol_problems(objects, nm, files, rules):
    """Calls and references between folders, from the objects' symbol tables."""
    stage_of_base = {os.path.basename(rel): rel.split("/")[0] for rel in files}
    problems = []
    defined = {}  # symbol -> stage
    undefined = []  # (stage, object base, symbol)
    for obj in objects:
        base = os.path.basename(obj)
        for ext in (".o", ".obj"):
            if base.endswith(ext):
                base = base[: -len(ext)]
        stage = stage_of_base.get(base)
        if stage is None:
            problems.append(f"{obj}: an object of no lib/ source")
            continue
        run = subprocess.run([nm, "-P", obj], capture_output=True, text=True)
        if run.returncode != 0:
            problems.append(f"{obj}: {nm} failed: {run.stderr.strip()}")
            continue
        for ln in run.stdout.splitlines():
            parts = ln.split()
            if len(parts) < 2:
                continue
            sym, kind = parts[0], parts[1]
            if kind == "U":
                undefined.append((stage, base, sym))
            elif kind.isupper() and kind not in "UVW":
                defined[sym] = stage
    for stage, base, sym in undefined:
        tstage = defined.get(sym)
        if tstage and tstage != stage and tstage not in rules.get(stage, ()):
            problems.append(f"lib/{stage}/{base}: uses {sym} of {tstage}/: {stage}/ may not "
                            f"call {tstage}/")
    return problems


def check(root, objects=None, nm="nm", rules=RULES, quiet=False):
    problems = rules_problems(rules)
    found, graph, files = scan(root, rules)
    problems += found
    if objects is not None:
        problems += symbol_problems(objects, nm, files, rules)
    if not quiet:
        for p in problems:
            print(p, file=sys.stderr)
    return problems, graph, files


def self_test():
    """Each bad tree must fail with the problem named; the good one must pass."""
    good = {
        "lib/util/README.md": "", "lib/util/clock.h": "",
        "lib/io/README.md": "", "lib/io/reader.h": '#include "clock.h"\n',
        "lib/io/reader.c": '#include "reader.h"\n#include "ringfeed.h"\n',
        "lib/core/README.md": "", "lib/core/loader.c": '#include "reader.h"\n',
        "include/ringfeed.h": "",
    }
    rules = {"core": ["io", "util"], "io": ["util"], "util": []}
    cases = [
        ("good", {}, None),
        ("upward", {"lib/io/reader.c": '#include "loader.h"\n', "lib/core/loader.h": ""},
         "io/ may not include core/"),
        ("cycle", {"lib/util/clock.h": '#include "clock2.h"\n',
                   "lib/util/clock2.h": '#include "clock.h"\n'}, "files: an include cycle"),
        ("stray", {"lib/stray.c": ""}, "lib/ holds one folder per stage"),
        ("same name", {"lib/core/clock.h": ""}, "two files of that name"),
        ("no readme", {"lib/util/README.md": None}, "no README.md"),
        ("unknown", {"lib/core/loader.c": '#include "nowhere.h"\n'}, "names no file"),
    ]
    failed = 0
    for name, change, expect in cases:
        with tempfile.TemporaryDirectory() as d:
            tree = dict(good)
            tree.update(change)
            for rel, text in tree.items():
                if text is None:
                    continue
                os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
                with open(os.path.join(d, rel), "w") as f:
                    f.write(text)
            problems, _, _ = check(d, rules=rules, quiet=True)
            ok = (not problems) if expect is None else any(expect in p for p in problems)
            print(f"self-test {name}: {'ok' if ok else 'WRONG'}"
                  + ("" if ok else f" (problems: {problems})"))
            failed += not ok
    bad_rules = {"core": ["io", "util"], "io": ["util", "core"], "util": []}
    ok = any("RULES: a cycle" in p for p in rules_problems(bad_rules))
    print(f"self-test rules with a cycle: {'ok' if ok else 'WRONG'}")
    failed += not ok
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the source tree (default: this script's)")
    ap.add_argument("--objects", help="a file listing the library's object files (';' or lines)")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--graph", action="store_true", help="print the folders' include graph")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    objects = None
    if a.objects:
        with open(a.objects) as f:
            objects = [o for o in re.split(r"[;\n]", f.read()) if o.strip()]
    problems, graph, files = check(a.root, objects, a.nm)
    if a.graph:
        for stage in RULES:
            print(f"{stage}/ -> {', '.join(sorted(graph[stage])) or '(nothing)'}")
    if problems:
        print(f"check_layers: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    what = f"{len(files)} files" + (f", {len(objects)} objects" if objects is not None else "")
    print(f"check_layers: ok ({what}; no upward or sideways include, no cycle)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
