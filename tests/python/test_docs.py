"""The front door and the guides stay true: README.md and docs/*.md.

* Every relative link ([text](target), images too) outside code leads to a
  file or folder of the repository, and a link's #anchor into a Markdown
  file to one of its headings (GitHub's anchors: lower case, punctuation
  dropped, spaces to '-', repeats numbered).
* Every repository path named in them (in prose, in `code`, in code blocks:
  bin/, python/, src/, bench/, tests/, configs/, examples/, docs/, results/,
  scripts/, cmake/, .ci/, and the package's commands/, lib/, analysis/,
  engine/, export/) exists; a `*` is a glob, `{h,cc}` each of its names, a
  program of bench/ is named by its source, a `<placeholder>` is no path;
  build/ and runs/ are made by the build and the runs, not committed.
* Every verdict quoted in a code block (a line that begins CHANGE to, KEEP
  or UNDECIDED) follows the convention: the paragraph just before the block
  names the verdict file(s) it comes from, `results/<stem>.verdict.json`,
  and the rule they were made by, "rule version N, today's" or "rule version
  N, older than today's M". Each file exists and its rule.version is N; N
  is lib/rule.py's RULE_VERSION when it says today's, M is when it says
  older (so a new rule version turns every such sentence red until the
  example is made anew or marked older); each quoted line but the command
  and '...' is a line of one of the files' console output,
  `results/<stem>.txt`, and each verdict line is one of the verdict files'
  verdicts (change to that setting, keep, undecided). README.md quotes at
  least one verdict and only today's.
  The same phrases in prose name today's version too.
* README.md, the front door, is at most 200 lines.
"""
import glob
import json
import os
import re
import unittest

import helpers
from threadburn.lib.rule import RULE_VERSION

REPO = helpers.REPO
README_MAX_LINES = 200
TOP = r"(?:bin|python|src|bench|tests|configs|examples|docs|results|scripts|cmake|\.ci)"
PKG = r"(?:commands|lib|analysis|engine|export)"
PATH = re.compile(r"(?<![\w/.~$<{@-])((?:" + TOP + "|" + PKG + r")/[\w.\-/*]*[\w*/])")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
VERDICT = re.compile(r"^\s*(CHANGE to (\S+?):|KEEP |UNDECIDED)")
MARK = re.compile(r"rule version (\d+), (?:(today's)|older than today's (\d+))")
VERDICT_FILE = re.compile(r"results/([\w.\-]+)\.verdict\.json")


def doc_files():
    return ["README.md"] + sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs", "*.md")))


def read(rel):
    with open(os.path.join(REPO, rel)) as f:
        return f.read()


def blocks(text):
    """[(first line index, fence line index, [lines])] of the fenced code blocks; and the lines outside them
    (those inside as '')."""
    out, prose, inside, start, body = [], [], False, 0, []
    for i, line in enumerate(text.split("\n")):
        if line.lstrip().startswith("```"):
            if inside:
                out.append((start, body))
            else:
                start, body = i, []
            inside = not inside
            prose.append("")
        elif inside:
            body.append(line)
            prose.append("")
        else:
            prose.append(line)
    return out, prose


def slug(heading):
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(rel):
    seen, out = {}, set()
    for line in blocks(read(rel))[1]:
        m = HEADING.match(line)
        if m:
            s = slug(m.group(2))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def broken_links(rel):
    """['line N: target (why)'] of rel's relative links that lead nowhere."""
    out, here = [], os.path.dirname(rel)
    for n, line in enumerate(blocks(read(rel))[1], 1):
        for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(here, path)) if path else rel
            if not os.path.exists(os.path.join(REPO, dest)):
                out.append(f"line {n}: {target} (no {dest})")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                out.append(f"line {n}: {target} (no heading #{anchor} in {dest})")
    return out


def path_exists(p):
    if glob.glob(os.path.join(REPO, p)) or glob.glob(os.path.join(REPO, p + ".cc")):
        return True
    return bool(re.match(PKG + "/", p)) and bool(glob.glob(os.path.join(REPO, "python", "threadburn", p)))


def missing_paths(rel):
    """['line N: path'] of the repository paths rel names that do not exist."""
    text, out = read(rel), []
    for m in PATH.finditer(text):
        p, rest = m.group(1), text[m.end():m.end() + 40]
        if re.match(r"[\w.\-]*[<{]", rest) and not rest.startswith(".{"):
            continue  # a placeholder: results/<stem>.csv, cuda-check-<gpu>.csv
        names = [p]
        brace = re.match(r"\.\{([\w,]+)\}", rest)
        if brace:
            names = [f"{p}.{ext}" for ext in brace.group(1).split(",")]
        for name in names:
            if not path_exists(name.rstrip("/")):
                out.append(f"line {text.count(chr(10), 0, m.start()) + 1}: {name}")
    return out


def verdict_examples(rel):
    """[(line number, marker paragraph, [block lines])] of the code blocks that quote a verdict."""
    found, lines = [], read(rel).split("\n")
    for start, body in blocks(read(rel))[0]:
        if not any(VERDICT.match(l) for l in body):
            continue
        i = start - 1
        while i >= 0 and not lines[i].strip():
            i -= 1
        para = []
        while i >= 0 and lines[i].strip():
            para.insert(0, lines[i])
            i -= 1
        found.append((start + 1, " ".join(para), body))
    return found


def example_problems(rel, marker, body, today_only=False):
    """What is wrong with one quoted verdict example (empty: nothing)."""
    mark, stems = MARK.search(marker), VERDICT_FILE.findall(marker)
    if not mark or not stems:
        return ["the paragraph before it names no results/<stem>.verdict.json and 'rule version N, today's' "
                "(or 'older than today's M')"]
    problems, said = [], int(mark.group(1))
    if mark.group(2):
        if said != RULE_VERSION:
            problems.append(f"says rule version {said} is today's; lib/rule.py's is {RULE_VERSION}")
    else:
        if int(mark.group(3)) != RULE_VERSION:
            problems.append(f"says today's rule is {mark.group(3)}; lib/rule.py's is {RULE_VERSION}")
        if today_only:
            problems.append(f"quotes rule version {said}: the README quotes only today's rule ({RULE_VERSION})")
    console, verdicts = set(), []
    for stem in stems:
        vpath = os.path.join(REPO, "results", stem + ".verdict.json")
        if not os.path.exists(vpath):
            problems.append(f"no results/{stem}.verdict.json")
            continue
        with open(vpath) as f:
            doc = json.load(f)
        if doc["rule"].get("version") != said:
            problems.append(f"results/{stem}.verdict.json was made by rule version {doc['rule'].get('version')}, "
                            f"not {said}")
        verdicts += [(w.get("verdict"), w.get("setting")) for w in doc["workloads"]]
        tpath = os.path.join(REPO, "results", stem + ".txt")
        if os.path.exists(tpath):
            with open(tpath) as f:
                console |= {l.strip() for l in f}
    command = False
    for line in body:
        s = line.strip()
        if s.startswith("$ ") or command:
            command = s.endswith("\\")
            continue
        if not s or s == "...":
            continue
        if s not in console:
            problems.append(f"not in the console output of {', '.join(stems)}: {s[:100]}")
        m = VERDICT.match(line)
        if m:
            want = ("change", m.group(2)) if m.group(2) else (m.group(1).strip().lower(), None)
            if not any(v == want[0] and (want[1] is None or s_ == want[1]) for v, s_ in verdicts):
                problems.append(f"no verdict {want} in {', '.join(stems)}.verdict.json: {s[:80]}")
    return problems


class Docs(unittest.TestCase):
    def test_every_relative_link_leads_somewhere(self):
        for rel in doc_files():
            with self.subTest(rel):
                self.assertEqual(broken_links(rel), [])

    def test_every_path_named_exists(self):
        for rel in doc_files():
            with self.subTest(rel):
                self.assertEqual(missing_paths(rel), [])

    def test_every_quoted_verdict_names_its_file_and_rule(self):
        for rel in doc_files():
            for line, marker, body in verdict_examples(rel):
                with self.subTest(f"{rel}:{line}"):
                    self.assertEqual(example_problems(rel, marker, body, today_only=rel == "README.md"), [])

    def test_every_todays_rule_said_is_todays(self):
        """Prose too: 'rule version N, today's' and 'older than today's M' name lib/rule.py's version."""
        for rel in doc_files():
            with self.subTest(rel):
                said = [(m.group(0), int(m.group(1)) if m.group(2) else int(m.group(3)))
                        for m in MARK.finditer(re.sub(r"\s+", " ", read(rel)))]
                self.assertEqual([s for s, v in said if v != RULE_VERSION], [])

    def test_the_readme_quotes_a_verdict_of_todays_rule(self):
        self.assertGreaterEqual(len(verdict_examples("README.md")), 1)

    def test_the_readme_is_short(self):
        self.assertLessEqual(read("README.md").count("\n"), README_MAX_LINES)


class KnownAnswers(unittest.TestCase):
    """The checks themselves, on texts whose answers are known by construction."""

    def test_slug(self):
        self.assertEqual(slug("Decide in one run: `tune --in-run`"), "decide-in-one-run-tune---in-run")
        self.assertEqual(slug("The build's configurations, tested here"), "the-builds-configurations-tested-here")

    def test_an_older_rule_must_say_so(self):
        body = ["$ bin/threadburn tune -- x", "...", "KEEP plain: nothing"]
        older = []
        for path in sorted(glob.glob(os.path.join(REPO, "results", "*.verdict.json"))):
            with open(path) as f:
                version = json.load(f)["rule"].get("version")
            if version != RULE_VERSION:
                older.append((os.path.basename(path).removesuffix(".verdict.json"), version))
        self.assertTrue(older)
        stem, version = older[0]
        wrong = example_problems("x.md", f"Made by rule version {RULE_VERSION}, today's: results/{stem}.verdict.json",
                                 body)
        self.assertTrue(any("was made by rule version" in p for p in wrong), wrong)
        said = example_problems("x.md", f"rule version {version}, older than today's {RULE_VERSION}: "
                                        f"results/{stem}.verdict.json", body, today_only=True)
        self.assertTrue(any("README quotes only today's" in p for p in said), said)
        self.assertTrue(example_problems("x.md", "no marker here", body))


if __name__ == "__main__":
    unittest.main()
