"""The baseline: a Textual hello-world app, started the same way gpucon is."""

from textual.app import App, ComposeResult
from textual.widgets import Static


class HelloApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("Hello, world")


if __name__ == "__main__":
    HelloApp().run()
