"""threadburn report's page in a real headless browser (Debian's chromium):
it renders, every image loads (the page's own script writes the count into
<body data-images-ok>, read back with --dump-dom), the browser logs no
console message (errors, CSP violations: --enable-logging=stderr), the
verdict is there, and a screenshot passes a layout sanity check (not
pixels): its size, not blank, and the verdict's band near the top.

The check must be able to fail: broken copies of a good page (an image that
does not decode, a script error, no verdict, a blank page) are each caught.

Run as a program (ctest report.browser) it exits 77 when chromium is
missing; under unittest discover it skips.
"""
import base64
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import helpers
from threadburn.export import html as reportpage

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SKIP = "chromium is not installed (apt install chromium; scripts/setup.sh lists it)"
WINDOW = (1280, 1600)
TOP_BAND = 420  # px: the verdict band starts within it
CONSOLE = re.compile(r':CONSOLE(?::\d+|\(\d+\))\] "(.*)", source: (\S*)')
REFERENCES = ("default.csv", "tune-sleep_step_sleep.csv")


def chromium(tmp, *args):
    profile = tempfile.mkdtemp(prefix="profile-", dir=tmp)
    return subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", f"--user-data-dir={profile}",
                           "--no-first-run", "--hide-scrollbars", "--virtual-time-budget=5000",
                           "--enable-logging=stderr", "--v=0", *args],
                          capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)


def hex_rgb(color):
    return tuple(int(color[i:i + 2], 16) / 255 for i in (1, 3, 5))


def screenshot_problems(png, first_verdict):
    import matplotlib.image
    import numpy
    img = matplotlib.image.imread(png)[:, :, :3]
    problems = []
    if img.shape[:2] != (WINDOW[1], WINDOW[0]):
        problems.append(f"screenshot is {img.shape[1]}x{img.shape[0]}, not {WINDOW[0]}x{WINDOW[1]}")
        return problems
    ink = (img.min(axis=2) < 0.9).mean()
    if ink < 0.01:
        problems.append(f"screenshot is blank ({ink:.2%} of it not white)")
    top = img[:TOP_BAND]
    if (top.max(axis=2) < 0.35).mean() < 0.002:
        problems.append("no text in the top band")
    if first_verdict:
        band = numpy.abs(top - numpy.array(hex_rgb(reportpage.VERDICT_COLORS[first_verdict][0]))).max(axis=2) < 0.02
        if band.mean() < 0.03:
            problems.append(f"the {first_verdict} verdict's band is not near the top ({band.mean():.2%} of it)")
    return problems


def truncated_images(text):
    """The embedded PNGs that do not decode to the end: a browser shows a cut
    PNG's top rows and reports its full size (naturalWidth comes from the
    header), so the page's own check cannot see those."""
    import io
    import matplotlib.image
    bad = []
    for i, data in enumerate(re.findall(r'src="data:image/png;base64,([^"]*)"', text)):
        try:
            matplotlib.image.imread(io.BytesIO(base64.b64decode(data)), format="png")
        except Exception as e:  # noqa: BLE001 (any decoding failure)
            bad.append(f"image {i + 1} does not decode: {type(e).__name__}")
    return bad


def check_page(path, tmp):
    """The problems a browser finds with the page at path ([] when none)."""
    url = "file://" + os.path.abspath(path)
    with open(path) as f:
        problems = truncated_images(f.read())
    dom = chromium(tmp, "--dump-dom", url)
    if dom.returncode != 0 or "<body" not in dom.stdout:
        return [f"chromium --dump-dom failed ({dom.returncode}): {dom.stderr[-300:]}"]
    problems += [f"console: {m.group(1)}" for m in CONSOLE.finditer(dom.stderr)]
    body = re.search(r"<body([^>]*)>", dom.stdout).group(1)
    images_ok = re.search(r'data-images-ok="([^"]*)"', body)
    count = re.search(r'data-images="(\d+)"', body)
    if not images_ok or images_ok.group(1) != "yes":
        problems.append(f"images: {images_ok.group(1) if images_ok else 'the page script did not run'}")
    if not count or int(count.group(1)) == 0:
        problems.append("no image on the page")
    section = re.search(r'<section id="verdict">(.*?)</section>', dom.stdout, re.S)
    headline = section and re.search(r'<p class="headline">(CHANGE to|KEEP|UNDECIDED|ONE RUN|NO VERDICT)',
                                     section.group(1))
    if not headline:
        problems.append("no verdict on the page")
    first = section and re.search(r'class="verdict (\w+)"', section.group(1))
    png = os.path.join(tmp, "shot.png")
    shot = chromium(tmp, f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={png}", url)
    if shot.returncode != 0 or not os.path.exists(png):
        return problems + [f"chromium --screenshot failed ({shot.returncode})"]
    problems += screenshot_problems(png, first.group(1) if first else None)
    os.remove(png)
    return problems


@unittest.skipUnless(CHROMIUM, SKIP)
class Browser(helpers.TempDir, unittest.TestCase):
    def report(self, csv_path, name):
        out = self.path(name)
        result = helpers.threadburn("report", csv_path, "-o", out)
        self.assertEqual(result.returncode, 0, result.stderr)
        return out

    def test_the_reports_of_the_references_and_a_run(self):
        run_dir = shutil.copytree(os.path.join(helpers.FIXTURES, "report_run"), self.path("run"))
        for csv_path in [os.path.join(helpers.REPO, "results", n) for n in REFERENCES] + \
                [os.path.join(run_dir, "run.csv")]:
            with self.subTest(csv=os.path.basename(csv_path)):
                page = self.report(csv_path, os.path.basename(csv_path) + ".html")
                self.assertEqual(check_page(page, self.tmp), [])

    def test_the_check_catches_a_broken_page(self):
        good = self.report(os.path.join(helpers.REPO, "results", REFERENCES[1]), "good.html")
        with open(good) as f:
            text = f.read()
        broken = {
            "images": re.sub(r'src="data:image/png;base64,[^"]*"', 'src="data:image/png;base64,AAAA"', text, 1),
            "cut image": re.sub(r'src="data:image/png;base64,([^"]{400})[^"]*"', r'src="data:image/png;base64,\1"',
                                text, 1),
            "console": text.replace("</body>", "<script>noSuchFunction();</script></body>"),
            "no verdict": re.sub(r'<section id="verdict">.*?</section>', '<section id="verdict"></section>', text,
                                 flags=re.S),
            "blank": text.replace("</head>", "<style>body { visibility: hidden; }</style></head>"),
            "outside load": text.replace("<h1>", '<img alt="remote" src="http://example.invalid/x.png"><h1>'),
        }
        expect = {"images": "images: no", "cut image": "image 1 does not decode",
                  "console": "console: Uncaught ReferenceError", "no verdict": "no verdict",
                  "blank": "blank", "outside load": "violates the following Content Security Policy"}
        for what, page in broken.items():
            with self.subTest(broken=what):
                path = helpers.write_file(self.path(f"broken-{what.replace(' ', '_')}.html"), page)
                problems = check_page(path, self.tmp)
                self.assertTrue(any(expect[what] in p for p in problems), problems)


if __name__ == "__main__":
    if not CHROMIUM:
        print(f"skipped: {SKIP}")
        sys.exit(77)
    unittest.main()
