"""Sphinx configuration of adjit's documentation site.

Build (from the repository root; warnings are errors, as in tests/docs/test_docs_build.py):

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Pages are MyST Markdown (.md); notebooks (notebooks/*.ipynb) are rendered and run by myst-nb;
the gallery (gallery/, generated: never edit it) is sphinx-gallery's, from
examples/gallery/plot_*.py, each example run by the build; the API reference (api/) is
autodoc over the docstrings.
"""
import os
import sys

from pygments import token
from pygments.lexer import RegexLexer

DOCS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(DOCS)
# autodoc imports adjit from this checkout, not from whatever else is installed.
sys.path.insert(0, ROOT)

project = "adjit"
author = "the adjit developers"
copyright = "2026, the adjit developers"

extensions = [
    "myst_nb",                 # MyST Markdown pages and .ipynb notebooks (includes myst_parser)
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb", ".rst": "restructuredtext"}
exclude_patterns = [
    "_build",
    # sphinx-gallery writes a notebook of each example beside its page for download: those
    # are files to download, not pages of the site.
    "gallery/*.ipynb",
    "Thumbs.db", ".DS_Store",
]

# Every cross-reference must resolve (an internal link that does not is a warning, so an
# error under -W).
nitpicky = True
# Names that docstrings mention in prose and types that are not adjit's (NumPy's, the
# standard library's) have no page here to link to.
nitpick_ignore_regex = [
    ("py:class", r"(numpy|np|torch|jax|mpi4py|collections|typing|types|enum|os)\..*"),
    ("py:class", r"(optional|callable|array|array_like|ndarray|function|sequence|.*of.*)"),
]

# MyST: `{math}` and $...$, definition lists, and heading anchors so that links to
# page.md#a-heading resolve.
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 3

# Notebooks run at every build (so a notebook that stops working breaks the build); a cell
# that raises fails the build unless the cell is tagged raises-exception.
nb_execution_mode = "force"
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True

autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = True

sphinx_gallery_conf = {
    "examples_dirs": os.path.join(ROOT, "examples", "gallery"),
    "gallery_dirs": os.path.join(DOCS, "gallery"),
    # Only plot_*.py are gallery examples; each is run by the build and its figures kept.
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "within_subsection_order": "FileNameSortKey",
    "plot_gallery": "True",
    "abort_on_example_error": True,
    "image_scrapers": ("matplotlib",),
    "remove_config_comments": True,
    "download_all_examples": False,
    "show_memory": False,
    # No sg_execution_times pages written into the source tree.
    "write_computation_times": False,
}


def _forget_removed_examples():
    """sphinx-gallery regenerates gallery/ but never removes the pages of an example that
    is gone (renamed or deleted), which would then be pages in no toctree: remove them."""
    gallery = os.path.join(DOCS, "gallery")
    examples = os.path.join(ROOT, "examples", "gallery")
    if not os.path.isdir(gallery):
        return
    for name in os.listdir(gallery):
        stem = name.split(".", 1)[0]
        if (stem.startswith("plot_")
                and not os.path.exists(os.path.join(examples, stem + ".py"))):
            os.remove(os.path.join(gallery, name))


_forget_removed_examples()


class MlirLexer(RegexLexer):
    """MLIR's textual IR (```mlir blocks: adj IR, FileCheck files), which Pygments does not
    know: comments, SSA values, symbols, attributes, types, operation names."""
    name = "MLIR"
    aliases = ["mlir"]
    tokens = {
        "root": [
            (r"//.*?$", token.Comment.Single),
            (r'"(\\\\|\\"|[^"])*"', token.String),
            (r"%[\w.$#-]+", token.Name.Variable),
            (r"\^[\w.$-]+", token.Name.Label),
            (r"@[\w.$-]+", token.Name.Function),
            (r"#[\w.$-]+", token.Name.Constant),
            (r"!\w[\w.]*", token.Keyword.Type),
            (r"\b(i\d+|f16|bf16|f32|f64|index|memref|tensor|vector|none)\b", token.Keyword.Type),
            (r"\b[a-z_]\w*(\.[a-z_]\w*)+\b", token.Name.Builtin),     # dialect.op
            (r"\b(func|module|return|true|false|to|step|iter_args|attributes|loc)\b",
             token.Keyword),
            (r"-?\d+(\.\d+)?([eE][-+]?\d+)?", token.Number),
            (r"0x[0-9a-fA-F]+", token.Number.Hex),
            (r"[-=<>:,()\[\]{}*+?]", token.Punctuation),
            (r"\s+", token.Whitespace),
            (r"\w+", token.Name),
            (r".", token.Text),
        ],
    }


def setup(app):
    app.add_lexer("mlir", MlirLexer)


html_theme = "furo"
html_title = "adjit"
html_static_path = []
