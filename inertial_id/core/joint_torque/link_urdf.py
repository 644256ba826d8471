"""Writing an identified link model back into its URDF: only the ``<inertial>`` tags of the
identified links change."""


from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
from numpy.typing import ArrayLike

from inertial_id.core.errors import ModelError, SolverError
from inertial_id.core.joint_torque.link_model import N_PI, LinkModel, transform_parameters
from inertial_id.core.parameters import (
    BodyParameters,
)

# --------------------------------------------------------------------------- URDF writing


_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def _mask_comments(text: str) -> str:
    """``text`` with comments blanked (same length, so offsets stay valid)."""
    return _COMMENT.sub(lambda m: " " * len(m.group(0)), text)


def inertial_xml(body: BodyParameters, indent: str, step: str = "  ", digits: int = 9) -> str:
    """A URDF ``<inertial>`` element of ``body`` (origin at the CoM, the link's axes, inertia
    about the CoM), its inner lines indented by ``indent + step``, numbers to ``digits``
    significant digits."""
    def f(x: float) -> str:
        return f"{x:.{digits}g}"

    c, i = body.com, body.inertia_com
    inner = indent + step
    return (f"<inertial>\n"
            f'{inner}<origin xyz="{" ".join(f(v) for v in c)}" rpy="0 0 0"/>\n'
            f'{inner}<mass value="{f(body.mass)}"/>\n'
            f'{inner}<inertia ixx="{f(i[0, 0])}" ixy="{f(i[0, 1])}" ixz="{f(i[0, 2])}" '
            f'iyy="{f(i[1, 1])}" iyz="{f(i[1, 2])}" izz="{f(i[2, 2])}"/>\n'
            f"{indent}</inertial>")


def _replace_inertial(text: str, link: str, body: BodyParameters) -> str:
    """Splice a new ``<inertial>`` into ``link``'s element; all other bytes are kept."""
    masked = _mask_comments(text)
    start = re.search(rf"<link\s[^>]*name\s*=\s*[\"']{re.escape(link)}[\"'][^>]*?(/?)>", masked)
    if start is None:
        raise ModelError(f"link {link!r} not found in the URDF text")
    line_start = masked.rfind("\n", 0, start.start()) + 1
    link_indent = re.match(r"[ \t]*", masked[line_start:start.start()]).group(0)
    if start.group(1) == "/":  # <link name="x"/>: open it
        opening = text[start.start():start.end() - 2].rstrip() + ">"
        block = inertial_xml(body, link_indent + "  ")
        new = f"{opening}\n{link_indent}  {block}\n{link_indent}</link>"
        return text[:start.start()] + new + text[start.end():]
    end = masked.find("</link>", start.end())
    inner = re.search(r"<inertial\b.*?</inertial>|<inertial\b[^>]*/>",
                      masked[start.end():end], re.DOTALL)
    if inner is None:
        indent = link_indent + "  "
        insert = f"\n{indent}{inertial_xml(body, indent)}"
        return text[:start.end()] + insert + text[start.end():]
    a, b = start.end() + inner.start(), start.end() + inner.end()
    line = masked.rfind("\n", 0, a) + 1
    indent = re.match(r"[ \t]*", masked[line:a]).group(0)
    block = inertial_xml(body, indent)
    comments = _COMMENT.findall(text[a:b])  # keep the element's comments, first inside it
    if comments:
        kept = "".join(f"\n{indent}  {c}" for c in comments)
        block = block.replace("<inertial>", "<inertial>" + kept, 1)
    return text[:a] + block + text[b:]


def identified_urdf(model: LinkModel, standard: ArrayLike) -> str:
    """The model's URDF text with each child link's ``<inertial>`` replaced.

    Each link gets its own parameters ``pi_i - a_i`` (the identified body minus the CAD of
    what is rigidly attached), converted to the link frame: mass, ``origin xyz`` = CoM,
    ``rpy="0 0 0"``, inertia about the CoM in the link's axes. Everything else is kept byte
    for byte. Raises :class:`SolverError` when a link would get a non-positive mass.
    """
    standard = np.asarray(standard, dtype=float).reshape(model.n, N_PI)
    text = model.urdf
    for i, link in enumerate(model.link_names):
        own = standard[i] - model.attachments[i]
        if own[0] <= 0:
            raise SolverError(f"link {link} would get a non-positive mass ({own[0]:.4g} kg)")
        in_link = transform_parameters(own, model.link_placements[i].inverse())
        text = _replace_inertial(text, link, BodyParameters.from_pi(in_link))
    try:
        ET.fromstring(text)
    except ET.ParseError as exc:  # pragma: no cover - a bug in the splicing
        raise ModelError(f"the identified URDF does not parse: {exc}") from exc
    return text
