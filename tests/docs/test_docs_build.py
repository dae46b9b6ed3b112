"""The documentation site builds without a warning, and its internal links resolve.

One Sphinx build for the module (the command README.md gives, warnings as errors, into a
temporary folder): it runs every gallery example (examples/gallery/plot_*.py, stale or not)
and every notebook (docs/notebooks/*.ipynb, myst-nb), and autodoc imports the API. Sphinx
itself reports a Markdown link or cross-reference that does not resolve (nitpicky); the
link check below reads the HTML it wrote, so links made any other way (raw HTML, the
gallery's pages, anchors) are held to the same rule.
"""
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs-html")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "Agg"
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         # A fresh environment (no cached doctrees) and every gallery example run, even one
         # sphinx-gallery's checksums call unchanged since an earlier build in this tree.
         "-E", "-d", str(out / ".doctrees"), "-D", "sphinx_gallery_conf.run_stale_examples=1",
         "docs", str(out / "html")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    return result, out / "html"


def test_docs_build_without_warnings(site):
    result, html = site
    assert result.returncode == 0, (
        f"the docs build failed or warned (warnings are errors):\n{result.stderr[-20000:]}"
        f"\n{result.stdout[-5000:]}")
    assert (html / "index.html").is_file()


HREF = re.compile(r'(?:href|src)="([^"]*)"')
ID = re.compile(r'\bid="([^"]*)"')


def internal_links(page: Path, html: Path):
    """(target file, fragment) of each link of an HTML page that stays in the site."""
    for link in HREF.findall(page.read_text(encoding="utf-8")):
        parts = urlsplit(link)
        if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:")):
            continue
        target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
        yield link, target, unquote(parts.fragment)


def test_internal_links_resolve(site):
    """Every link between the site's pages names a file the build wrote and, with a
    #fragment, an id on that page."""
    result, html = site
    assert result.returncode == 0, "the build failed: test_docs_build_without_warnings says why"
    ids = {}
    broken = []
    pages = sorted(html.rglob("*.html"))
    assert pages
    for page in pages:
        for link, target, fragment in internal_links(page, html):
            name = page.relative_to(html)
            if html.resolve() not in target.parents and target != html.resolve():
                broken.append(f"{name}: {link} leaves the site")
            elif not target.exists():
                broken.append(f"{name}: {link} (no such file)")
            elif fragment and target.suffix == ".html":
                if target not in ids:
                    ids[target] = set(ID.findall(target.read_text(encoding="utf-8")))
                if fragment not in ids[target]:
                    broken.append(f"{name}: {link} (no id {fragment!r} there)")
    assert not broken, "broken internal links:\n" + "\n".join(broken)


def test_readme_links_resolve():
    """README.md is not a page of the site (GitHub shows it), so Sphinx does not check its
    links: each relative link names a file of the repository, never one outside it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    broken = []
    for link in links:
        parts = urlsplit(link)
        if parts.scheme or parts.netloc:
            continue
        target = (ROOT / unquote(parts.path)).resolve()
        if ROOT not in target.parents or not target.exists():
            broken.append(link)
    assert not broken, f"README.md links to files that are not in the repository: {broken}"
