"""Background shades for cells that show a value's place between the lowest and highest of
its kind, made from the theme so every theme recolours them."""

from __future__ import annotations

from rich.style import Style
from textual.color import Color
from textual.widget import Widget


def shade_styles(widget: Widget, steps: int) -> list[Style]:
    """`steps` backgrounds from the theme's surface towards its accent, over the widget's
    own style."""
    low = Color.parse(widget.app.theme_variables.get("surface", "black"))
    high = Color.parse(widget.app.theme_variables.get("accent", "orange"))
    return [widget.rich_style + Style(bgcolor=low.blend(high, 0.08 + 0.5 * i / (steps - 1))
                                      .rich_color) for i in range(steps)]
