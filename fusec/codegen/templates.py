"""Loading and rendering the Jinja2 templates in ``templates/``.

In a checkout the templates sit in the top-level ``templates/`` directory; in an installed wheel the same
files are the package data of ``fusec.templates`` (pyproject maps that package to ``templates/``). The
environment is strict: an undefined variable is an error, never an empty string.
"""

from __future__ import annotations

import functools
import importlib.resources
from pathlib import Path

import jinja2

# templates/ beside the fusec package, when running from a checkout (pyproject.toml marks a checkout, so a
# stray top-level "templates" folder in site-packages is never taken for ours)
_CHECKOUT_ROOT = Path(__file__).resolve().parents[2]
_CHECKOUT_TEMPLATES = _CHECKOUT_ROOT / "templates"


def _loader() -> jinja2.BaseLoader:
    if (_CHECKOUT_ROOT / "pyproject.toml").is_file() and _CHECKOUT_TEMPLATES.is_dir():
        return jinja2.FileSystemLoader(str(_CHECKOUT_TEMPLATES))
    package = importlib.resources.files("fusec.templates")

    def load(name: str) -> str | None:
        resource = package.joinpath(name)
        return resource.read_text(encoding="utf-8") if resource.is_file() else None

    return jinja2.FunctionLoader(load)


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The one Jinja2 environment: StrictUndefined, trim_blocks, lstrip_blocks, keep_trailing_newline."""
    return jinja2.Environment(
        loader=_loader(),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(template_name: str, **context: object) -> str:
    """Render ``templates/<template_name>`` with ``context``; a missing variable raises ``UndefinedError``. An
    absolute path names a template of a kernel kind kept outside fusec (a plug-in's own file), which imports
    fusec's macros (``_kernel.cu.j2``) as the kinds' templates here do."""
    return _template(template_name).render(**context)


@functools.lru_cache(maxsize=64)
def _template(template_name: str) -> jinja2.Template:
    path = Path(template_name)
    if path.is_absolute():
        return environment().from_string(path.read_text(encoding="utf-8"))
    return environment().get_template(template_name)


HEADER_PROBE = "fusec_device.cuh"  # every kernel includes it: where it is, the helper headers are


def source(template_name: str) -> str:
    """The text of ``templates/<template_name>`` as it is on disk (a helper header: nothing to render)."""
    text, _, _ = environment().loader.get_source(environment(), template_name)
    return text


@functools.lru_cache(maxsize=1)
def header_dir() -> str:
    """The directory that holds the helper headers, for NVRTC's include path: ``templates/`` of a checkout, or the
    installed ``fusec.templates`` folder (a namespace package, so its ``files()`` is a MultiplexedPath whose
    ``str`` is no path: the folder is found through one of its headers)."""
    if (_CHECKOUT_ROOT / "pyproject.toml").is_file() and _CHECKOUT_TEMPLATES.is_dir():
        return str(_CHECKOUT_TEMPLATES)
    header = Path(str(importlib.resources.files("fusec.templates").joinpath(HEADER_PROBE)))
    if not header.is_file():  # never from pip, which installs files; a zipped install has no folder to include
        raise FileNotFoundError(f"fusec's helper headers are not files on disk ({header}): install fusec unzipped")
    return str(header.parent)
