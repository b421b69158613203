"""What the modal dialogs share: escape or Cancel closes with None, the primary button
submits through `_done`; `FormDialog`, a request model's fields as a form; and `Confirm`,
a yes-or-cancel question."""

from __future__ import annotations

from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label

from tuner.control.errors import SettingsError
from tuner.control.models import field_order, parse

R = TypeVar("R")
M = TypeVar("M", bound=BaseModel)


class Dialog(ModalScreen[R]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.variant == "primary":
            self._done()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def _done(self) -> None:
        """Checks the fields and dismisses with the result, or says what is missing. Every
        dialog defines it (a Screen's metaclass is not an ABC)."""
        raise NotImplementedError


def _input_type(annotation: Any) -> Literal["integer", "number", "text"]:
    """What an Input accepts for a field of this type: a number field takes only one."""
    types = getattr(annotation, "__args__", (annotation,))
    return "integer" if int in types else "number" if float in types else "text"


def _text(value: object) -> str:
    return "" if value in (None, "", []) else str(value)


class FormDialog(Dialog[M | None], Generic[M]):
    """The fields of `model` (tuner.control.models), labelled by their titles, then Start
    and Cancel; enter in a field submits too. Inputs are named `<prefix>-<field>`. The text
    is read by the model, which says what a field allows; the dialog closes with the
    request only once the model accepts it."""

    prefix: ClassVar[str]
    model: type[M]

    def __init__(self, **initial: Any):
        super().__init__()
        self.initial = initial  # a field's first text, where not its default

    def form(self) -> ComposeResult:
        # A label beside each field, as wide as the longest: a placeholder is gone once
        # there is a value.
        names = field_order(self.model)
        width = max(len(self.model.model_fields[n].title or n) for n in names) + 1
        for name in names:
            field = self.model.model_fields[name]
            label = field.title or name
            with Horizontal(classes="dialog-field"):
                yield Label(label).set_styles(f"width: {width};")
                yield Input(_text(self.initial.get(name, field.default)), placeholder=label,
                            type=_input_type(field.annotation), compact=True,
                            id=f"{self.prefix}-{name}")
        with Horizontal(classes="dialog-buttons"):
            yield Button("Start", variant="primary", id="start")
            yield Button("Cancel", id="cancel")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._done()

    def _done(self) -> None:
        texts = {str(field.id).removeprefix(f"{self.prefix}-"): field.value
                 for field in self.query(Input)}
        try:
            request = parse(self.model, texts)
        except SettingsError as err:
            first = next(iter(err.problems)).split(".")[0]
            self.query_one(f"#{self.prefix}-{first}", Input).focus()
            self.notify(str(err), severity="warning", markup=False)
            return
        self.dismiss(request)


class Confirm(Dialog[bool]):
    """A question with a yes button (primary) and Cancel; dismissed with True or None."""

    def __init__(self, question: str, yes: str):
        super().__init__()
        self.question, self.yes = question, yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, classes="dialog-title", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.yes, variant="primary", id="yes")
                yield Button("Cancel", id="cancel")

    def _done(self) -> None:
        self.dismiss(True)
