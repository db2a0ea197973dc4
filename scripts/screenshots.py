"""Look at the built website the way a reader does: headless Chromium, every page.

    python scripts/screenshots.py                         # _build/html -> _build/screenshots
    python scripts/screenshots.py --mathjax node_modules/mathjax   # offline: a local MathJax 3

For every HTML page of the book it saves a screenshot (`<out>/<page>.png`, plus
`<page>__exploreK.png`: each explorable figure alone, after its slider moved once) and checks, in the
rendered DOM (after JavaScript ran):

* maths rendered: pages whose source has maths contain MathJax output (`mjx-container`) and no
  MathJax error;
* figures present: every `<img>` of the site loaded (naturalWidth > 0); external images (the
  Colab badge) are counted but not checked, as the check may run offline;
* explorable figures respond: each `lrnn.course.widgets` slider is moved once by the page itself
  (`?lrnn-selftest` in the URL) and must switch its image;
* no traceback or error output in the text, except in cells tagged `raises-exception` (an
  exercise stub that is meant to raise until the student fills it in), which are counted.

The pages are served from a local HTTP server. The site loads MathJax from its CDN; where there is
no network, `--mathjax DIR` (an `npm install mathjax@3` folder) is served in its place — the built
files are not modified. Needs Chromium (Debian package `chromium`). Exit status 1 if a check fails.
Writes `<out>/report.json`.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CDN_MATHJAX = re.compile(r"https://cdn\.jsdelivr\.net/npm/mathjax@3/es5/")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--mute-audio"]

# Injected (by the test server only) at the end of every page: after load and typesetting it
# writes what it found into <body data-lrnn-check="...">, which --dump-dom then shows.
PROBE = """<script>
(function(){
 function report(){
  var imgs=[].slice.call(document.images);
  var local=imgs.filter(function(i){return i.src.indexOf(location.origin)===0||i.src.indexOf('data:')===0;});
  var broken=local.filter(function(i){return !(i.complete&&i.naturalWidth>0);}).map(function(i){return (i.getAttribute('src')||'').slice(0,80);});
  var explorers=[].slice.call(document.querySelectorAll('.lrnn-explore')).map(function(e){return e.dataset.selftest||'no-result';});
  // a cell tagged raises-exception (an exercise stub, a demonstrated error) may show its traceback
  var errors=[].slice.call(document.querySelectorAll('.output.error, .output.traceback'));
  var expected=errors.filter(function(e){return e.closest('.tag_raises-exception');});
  var clone=document.body.cloneNode(true);
  [].slice.call(clone.querySelectorAll('.tag_raises-exception .output')).forEach(function(e){e.remove();});
  var unexpected=clone.textContent||'';
  var out={images:local.length,external_images:imgs.length-local.length,broken:broken,
   math:document.querySelectorAll('mjx-container').length,
   math_errors:[].slice.call(document.querySelectorAll('mjx-merror, .MathJax_Error')).slice(0,5).map(function(e){
     return e.getAttribute('data-mjx-error')||e.textContent||'';}),
   math_error_sources:(function(){var out=[];try{Array.from(MathJax.startup.document.math).forEach(function(m){
     if(out.length<5&&m.root&&/merror/.test(m.root.toString())){out.push(String(m.math).slice(0,120));}});}catch(err){}
     return out;})(),
   math_source:document.querySelectorAll('.math, span.math, div.math').length,
   explorers:explorers,
   traceback:/Traceback \\(most recent call last\\)/.test(unexpected),
   error_outputs:errors.length-expected.length,
   expected_errors:expected.length};
  document.body.setAttribute('data-lrnn-check', JSON.stringify(out));
 }
 function whenReady(){
  if(window.MathJax&&MathJax.startup&&MathJax.startup.promise){MathJax.startup.promise.then(report,report);}
  else{report();}
 }
 function scroll(){
  var m=/[?&]lrnn-scroll=(\d+)/.exec(location.search);
  var e=m&&document.querySelectorAll('.lrnn-explore')[+m[1]];
  if(e){document.body.innerHTML='';document.body.style.padding='12px';document.body.appendChild(e);}
 }
 window.addEventListener('load',function(){setTimeout(function(){whenReady();scroll();},200);});
})();
</script>"""


def make_handler(site: Path, mathjax: Path | None):
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=str(site), **k)

        def log_message(self, *args):
            pass

        def do_GET(self):
            path = self.path.split("?", 1)[0].split("#", 1)[0]
            if mathjax is not None and path.startswith("/_mathjax_local/"):
                target = mathjax / path[len("/_mathjax_local/"):]
                return self._send(target.read_bytes() if target.is_file() else None,
                                  "application/javascript")
            if path.endswith(".html") or path.endswith("/"):
                file = site / path.lstrip("/")
                if path.endswith("/"):
                    file = file / "index.html"
                if file.is_file():
                    html = file.read_text(encoding="utf-8")
                    if mathjax is not None:
                        html = CDN_MATHJAX.sub("/_mathjax_local/es5/", html)
                    html = html.replace("</body>", PROBE + "</body>", 1)
                    return self._send(html.encode("utf-8"), "text/html; charset=utf-8")
            return super().do_GET()

        def _send(self, body, ctype):
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def chromium(binary: str, args: list[str], timeout: float = 120) -> str:
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout)
    return proc.stdout


def check_page(binary: str, url: str, png: Path, width: int, height: int, budget_ms: int) -> dict:
    dom = chromium(binary, [f"--virtual-time-budget={budget_ms}", "--dump-dom",
                            url + ("&" if "?" in url else "?") + "lrnn-selftest=1"])
    m = re.search(r"data-lrnn-check=\"([^\"]*)\"", dom)
    result = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&")) if m else None
    chromium(binary, [f"--virtual-time-budget={budget_ms}", f"--window-size={width},{height}",
                      f"--screenshot={png}", url])
    for k in range(len(result["explorers"]) if result else 0):
        # one more screenshot per explorable figure (shown alone), after its slider moved once
        chromium(binary, [f"--virtual-time-budget={budget_ms}", f"--window-size={width},{height // 2}",
                          f"--screenshot={png.with_name(png.stem + f'__explore{k}.png')}",
                          f"{url}?lrnn-selftest=1&lrnn-scroll={k}"])
    problems = []
    if result is None:
        problems.append("the page did not finish loading (no probe result)")
    else:
        if result["math_source"] and not result["math"]:
            problems.append(f"{result['math_source']} maths element(s) but no rendered MathJax")
        if result["math_errors"]:
            problems.append(f"MathJax error(s): {result['math_errors']} in {result['math_error_sources']}")
        if result["broken"]:
            problems.append(f"{len(result['broken'])} image(s) did not load: {result['broken'][:3]}")
        bad = [s for s in result["explorers"] if s not in ("pass", "single-frame")]
        if bad:
            problems.append(f"explorable figure slider(s) did not respond: {bad}")
        if result["traceback"] or result["error_outputs"]:
            problems.append("traceback or error output on the page (outside raises-exception cells)")
    if not png.is_file():
        problems.append("no screenshot")
    return {"url": url, "screenshot": str(png), "dom": result, "problems": problems}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "screenshots")
    parser.add_argument("--mathjax", type=Path, default=None,
                        help="folder of an npm mathjax@3 package, served instead of the CDN")
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser")
                        or "/usr/bin/chromium")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=2200)
    parser.add_argument("--budget-ms", type=int, default=15000, help="virtual time for JS per page")
    parser.add_argument("pages", nargs="*", help="pages relative to the site (default: all)")
    args = parser.parse_args(argv)

    if not Path(args.chromium).exists():
        print(f"Chromium not found ({args.chromium}); install the Debian package `chromium`.")
        return 2
    site = args.site.resolve()
    pages = args.pages or sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                                 if not p.relative_to(site).parts[0].startswith(("_", "."))
                                 and p.name not in ("genindex.html", "search.html"))
    args.out.mkdir(parents=True, exist_ok=True)
    mathjax = args.mathjax.resolve() if args.mathjax else None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(site, mathjax))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    report, failed = [], 0
    try:
        for page in pages:
            png = args.out / (page.replace("/", "__").removesuffix(".html") + ".png")
            result = check_page(args.chromium, base + page, png, args.width, args.height, args.budget_ms)
            report.append(result)
            dom = result["dom"] or {}
            status = "ok " if not result["problems"] else "BAD"
            failed += bool(result["problems"])
            print(f"{status} {page}: {dom.get('images', '?')} images, {dom.get('math', '?')} maths, "
                  f"sliders {dom.get('explorers', '?')}, expected exceptions {dom.get('expected_errors', '?')}" +
                  ("" if not result["problems"] else "\n    - " + "\n    - ".join(result["problems"])))
    finally:
        server.shutdown()
    (args.out / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"{len(pages) - failed}/{len(pages)} pages pass; screenshots in {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
