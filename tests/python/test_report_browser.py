"""threadburn report's page in a real headless browser (Debian's chromium):
it renders, every image loads (the page's own script writes the count into
<body data-images-ok>, read back from the DOM), the browser logs no
console message (errors, CSP violations: --enable-logging=stderr), the
verdict is there, and a screenshot passes a layout sanity check (not
pixels): its size, not blank, and the verdict's band near the top.

The check must be able to fail: broken copies of a good page (an image that
does not decode, a script error, no verdict, a blank page) are each caught.

One chromium loads every page (class Chromium: its DevTools pipe, a browser
context per page, the page read when 5000 ms of virtual time have passed, as
--virtual-time-budget=5000 does); each chromium start costs seconds of CPU,
and the check used to start one for --dump-dom and one for --screenshot per
page (18 in all).

Run as a program (ctest report.browser) it exits 77 when chromium is
missing; under unittest discover it skips.
"""
import base64
import concurrent.futures
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import helpers
from threadburn.export import html as reportpage

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SKIP = "chromium is not installed (apt install chromium; scripts/setup.sh lists it)"
WINDOW = (1280, 1600)
TOP_BAND = 420  # px: the verdict band starts within it
CONSOLE = re.compile(r':CONSOLE(?::\d+|\(\d+\))\] "(.*)", source: (\S*)')
REFERENCES = ("default.csv", "tune-sleep_step_sleep.csv")


class Chromium:
    """One headless chromium for every page, driven over its DevTools pipe
    (--remote-debugging-pipe: commands on fd 3, answers and events on fd 4,
    each a JSON text ended by NUL). A start costs seconds of CPU; the check
    used two per page (--dump-dom, then --screenshot). Each page loads in a
    browser context of its own (a fresh profile's state: no cache, no
    storage shared with the pages before it), with what --virtual-time-budget
    does: virtual time paused while fetches are pending, the page read when
    5000 ms of it have passed. Its console messages are in chromium's log
    (--enable-logging=stderr), read when it has ended."""

    def __init__(self, tmp):
        profile = tempfile.mkdtemp(prefix="profile-", dir=tmp)
        self.log_path = os.path.join(tmp, f"chromium-{os.path.basename(profile)}.log")
        commands_r, self.commands = os.pipe()
        self.answers, answers_w = os.pipe()
        # chromium's ends above 4, so that neither is overwritten when the other becomes 3 or 4
        low = (commands_r, answers_w)
        commands_r, answers_w = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in low)
        for fd in low:
            os.close(fd)

        def pipe_fds():  # in the child, before chromium starts
            os.dup2(commands_r, 3)
            os.dup2(answers_w, 4)

        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", f"--user-data-dir={profile}",
                 "--no-first-run", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
                 "--remote-debugging-pipe", f"--window-size={WINDOW[0]},{WINDOW[1]}", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, preexec_fn=pipe_fds, pass_fds=(3, 4))
        os.close(commands_r)
        os.close(answers_w)
        self.received, self.events, self.last_id = b"", [], 0

    def _message(self, deadline):
        while b"\0" not in self.received:
            ready, _, _ = select.select([self.answers], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise RuntimeError("chromium did not answer in time")
            chunk = os.read(self.answers, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self.received += chunk
        message, self.received = self.received.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, session=None, timeout=90, **params):
        self.last_id += 1
        command = {"id": self.last_id, "method": method, "params": params}
        if session:
            command["sessionId"] = session
        os.write(self.commands, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            message = self._message(deadline)
            if message.get("id") == self.last_id:
                if "error" in message:
                    raise RuntimeError(f"chromium: {method}: {message['error']}")
                return message["result"]
            self.events.append(message)

    def wait(self, event, session, timeout=90):
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == event and e.get("sessionId") == session for e in self.events):
            self.events.append(self._message(deadline))
        self.events = [e for e in self.events if e.get("sessionId") != session]

    def load(self, url):
        """(the page's DOM as --dump-dom prints it, a PNG of its window as --screenshot takes it)."""
        context = self.call("Target.createBrowserContext")["browserContextId"]
        target = self.call("Target.createTarget", url="about:blank", browserContextId=context)["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session)
        self.call("Emulation.setDeviceMetricsOverride", session, width=WINDOW[0], height=WINDOW[1],
                  deviceScaleFactor=1, mobile=False)
        self.call("Emulation.setVirtualTimePolicy", session, policy="pause")
        went = self.call("Page.navigate", session, url=url)
        if went.get("errorText"):
            raise RuntimeError(f"chromium could not open {url}: {went['errorText']}")
        self.call("Emulation.setVirtualTimePolicy", session, policy="pauseIfNetworkFetchesPending", budget=5000)
        self.wait("Emulation.virtualTimeBudgetExpired", session)
        dom = self.call("Runtime.evaluate", session, expression="document.documentElement.outerHTML",
                        returnByValue=True)["result"].get("value", "")
        png = base64.b64decode(self.call("Page.captureScreenshot", session, format="png")["data"])
        self.call("Target.closeTarget", targetId=target)
        self.call("Target.disposeBrowserContext", browserContextId=context)
        return dom, png

    def close(self):
        """(chromium's exit code, its log)."""
        try:
            self.call("Browser.close", timeout=30)
        except (RuntimeError, OSError):
            pass  # it may end before it answers; if it does not end, it is killed below
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        os.close(self.commands)
        os.close(self.answers)
        with open(self.log_path, errors="replace") as f:
            return code, f.read()


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


def check_pages(paths, tmp):
    """{path: the problems a browser finds with the page ([] when none)}: one chromium loads them all."""
    urls = {path: "file://" + os.path.abspath(path) for path in paths}
    problems, loaded, failure = {}, {}, None
    for path in paths:
        with open(path) as f:
            problems[path] = truncated_images(f.read())
    browser = Chromium(tmp)
    try:
        for path in paths:
            loaded[path] = browser.load(urls[path])
    except (RuntimeError, OSError, ValueError) as e:
        failure = str(e)
    finally:
        code, log = browser.close()
    if code != 0 and failure is None:
        failure = f"chromium exited with {code}"
    console = {path: [] for path in paths}
    for m in CONSOLE.finditer(log):  # by the page whose URL is the message's source; any other on every page
        pages = [p for p in paths if urls[p] == m.group(2)] or paths
        for page in pages:
            console[page].append(f"console: {m.group(1)}" + ("" if len(pages) == 1 else f" (source {m.group(2)})"))
    for path in paths:
        if failure:
            problems[path].append(f"chromium failed: {failure}: {log[-300:]}")
        if path not in loaded:
            continue
        dom, png = loaded[path]
        if "<body" not in dom:
            problems[path].append(f"no <body> in the DOM: {dom[:300]}")
            continue
        found, first = dom_problems(dom)
        problems[path] += console[path] + found
        shot = os.path.join(tmp, "shot.png")
        with open(shot, "wb") as f:
            f.write(png)
        problems[path] += screenshot_problems(shot, first)
        os.remove(shot)
    return problems


def dom_problems(dom):
    """(the problems of the DOM a page leaves, the class of its first verdict or None)."""
    problems = []
    body = re.search(r"<body([^>]*)>", dom).group(1)
    images_ok = re.search(r'data-images-ok="([^"]*)"', body)
    count = re.search(r'data-images="(\d+)"', body)
    if not images_ok or images_ok.group(1) != "yes":
        problems.append(f"images: {images_ok.group(1) if images_ok else 'the page script did not run'}")
    if not count or int(count.group(1)) == 0:
        problems.append("no image on the page")
    section = re.search(r'<section id="verdict">(.*?)</section>', dom, re.S)
    headline = section and re.search(r'<p class="headline">(CHANGE to|KEEP|UNDECIDED|ONE RUN|NO VERDICT)',
                                     section.group(1))
    if not headline:
        problems.append("no verdict on the page")
    first = section and re.search(r'class="verdict (\w+)"', section.group(1))
    return problems, first.group(1) if first else None


def broken_pages(text):
    """{what: a broken copy of a good page's text}, each a fault the check must catch."""
    return {
        "images": re.sub(r'src="data:image/png;base64,[^"]*"', 'src="data:image/png;base64,AAAA"', text, 1),
        "cut image": re.sub(r'src="data:image/png;base64,([^"]{400})[^"]*"', r'src="data:image/png;base64,\1"',
                            text, 1),
        "console": text.replace("</body>", "<script>noSuchFunction();</script></body>"),
        "no verdict": re.sub(r'<section id="verdict">.*?</section>', '<section id="verdict"></section>', text,
                             flags=re.S),
        "blank": text.replace("</head>", "<style>body { visibility: hidden; }</style></head>"),
        "outside load": text.replace("<h1>", '<img alt="remote" src="http://example.invalid/x.png"><h1>'),
    }


BROKEN_EXPECT = {"images": "images: no", "cut image": "image 1 does not decode",
                 "console": "console: Uncaught ReferenceError", "no verdict": "no verdict",
                 "blank": "blank", "outside load": "violates the following Content Security Policy"}


@unittest.skipUnless(CHROMIUM, SKIP)
class Browser(unittest.TestCase):
    """The reports of the references and of a run, and broken copies of the
    second reference's: made once, all checked by one chromium (check_pages)."""

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="tb-test-")
        cls.tmp = cls._tmp.name
        run_dir = shutil.copytree(os.path.join(helpers.FIXTURES, "report_run"), os.path.join(cls.tmp, "run"))
        csvs = [os.path.join(helpers.REPO, "results", n) for n in REFERENCES] + [os.path.join(run_dir, "run.csv")]
        cls.pages = {os.path.basename(c): os.path.join(cls.tmp, os.path.basename(c) + ".html") for c in csvs}
        with concurrent.futures.ThreadPoolExecutor(len(csvs)) as pool:  # the reports at once
            cls.reports = list(pool.map(lambda c: helpers.threadburn("report", c, "-o",
                                                                      cls.pages[os.path.basename(c)]), csvs))
        cls.broken = {}
        good = cls.pages[REFERENCES[1]]
        if os.path.exists(good):
            with open(good) as f:
                text = f.read()
            cls.broken = {what: helpers.write_file(os.path.join(cls.tmp, f"broken-{what.replace(' ', '_')}.html"),
                                                   page) for what, page in broken_pages(text).items()}
        paths = [p for p in cls.pages.values() if os.path.exists(p)] + list(cls.broken.values())
        cls.problems = check_pages(paths, cls.tmp)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_the_reports_of_the_references_and_a_run(self):
        for (csv_name, page), result in zip(self.pages.items(), self.reports):
            with self.subTest(csv=csv_name):
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(self.problems[page], [])

    def test_the_check_catches_a_broken_page(self):
        self.assertEqual(sorted(self.broken), sorted(BROKEN_EXPECT), "the good page to break was not made")
        for what, path in self.broken.items():
            with self.subTest(broken=what):
                problems = self.problems[path]
                self.assertTrue(any(BROKEN_EXPECT[what] in p for p in problems), problems)


if __name__ == "__main__":
    if not CHROMIUM:
        print(f"skipped: {SKIP}")
        sys.exit(77)
    unittest.main()
