"""Blueprint ``pages``: the HTML pages, rendered from ``web/templates``. Each
page fetches its data from the JSON API; the templates get only what the
first paint needs (docs/dashboard.md, "Pages and templates")."""

from __future__ import annotations

from flask import Blueprint, render_template

pages = Blueprint("pages", __name__)

PAGES = {
    "/": "overview",
    "/models": "models",
    "/streams": "streams",
    "/events": "events",
    "/logs": "logs",
    "/history": "history",
    "/board": "board",
}


def _page(name: str):
    def view() -> str:
        return render_template(f"{name}.html")

    view.__name__ = name
    return view


for _path, _name in PAGES.items():
    pages.add_url_rule(_path, _name, _page(_name), methods=["GET"])
